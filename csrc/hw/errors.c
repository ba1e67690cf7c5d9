/* npu_strerror and npu_error_name, generated from the one X-macro list. */
#include "npu/errors.h"

const char *npu_strerror(int status)
{
    switch (status) {
    case NPU_OK:
        return "success";
#define NPU_XX_MSG(name, code, msg) \
    case code:                      \
        return msg;
        NPU_ERRNO_MAP(NPU_XX_MSG)
#undef NPU_XX_MSG
    default:
        return "unknown npuemu error code";
    }
}

const char *npu_error_name(int status)
{
    switch (status) {
    case NPU_OK:
        return "OK";
#define NPU_XX_NAME(name, code, msg) \
    case code:                       \
        return #name;
        NPU_ERRNO_MAP(NPU_XX_NAME)
#undef NPU_XX_NAME
    default:
        return "UNKNOWN";
    }
}
