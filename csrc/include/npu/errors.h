/*
 * npu/errors.h - the one list of npuemu's C error codes.
 *
 * Every function of the C layer that can fail returns an int: NPU_OK (0) on
 * success, or one of the negative codes below.  The list is an X-macro in the
 * style of libuv's UV_ERRNO_MAP: each line holds the code's name, its number
 * and its message, and both the enum and npu_strerror() are generated from it,
 * so a code can never lack a message.  Numbers are part of the ABI: append new
 * codes with new numbers, never renumber.
 */
#ifndef NPU_ERRORS_H
#define NPU_ERRORS_H

#define NPU_ERRNO_MAP(XX)                                                                  \
    XX(INVALID_ARGUMENT, -1, "invalid argument (NULL pointer, bad enum value or size)")    \
    XX(NO_MEMORY, -2, "out of host memory")                                                \
    XX(NOT_SUPPORTED, -3, "the driver does not implement this operation")                  \
    XX(BAD_DEVICE, -4, "no such device number")                                            \
    XX(BAD_CHANNEL, -5, "no such execution channel on that device")                        \
    XX(BAD_MODEL_ID, -6, "no such loaded model")                                           \
    XX(BAD_WORK_ID, -7, "no such work in flight (unknown id, or it has already ended)")    \
    XX(INVALID_PRIORITY, -8,                                                               \
       "invalid scheduling config: need 0 <= appPriority <= 1000 and "                     \
       "0 <= minPriority <= maxPriority <= 2000")                                          \
    XX(DUPLICATE_UID, -9, "the same uid appears twice in one scheduling-config call")      \
    XX(INVALID_JOB_PRIORITY, -10, "jobPriority must be within 0..1000")                   \
    XX(NO_DIRECT_ACCESS, -11, "this uid has no direct access to the NPU (hasDirectAccess is false)") \
    XX(ATTRIBUTION_DENIED, -12,                                                            \
       "originalUid differs from uid but the uid may not attribute work to other uids")    \
    XX(WEIGHT_MEMORY_FULL, -13, "not enough free weight memory on the device for this model") \
    XX(SRAM_FULL, -14, "not enough free SRAM on the device for this model's working set") \
    XX(BAD_OPERAND_INDEX, -15, "an operand index is out of range")                         \
    XX(BAD_OPERAND_TYPE, -16, "an operand has an unknown or unsupported type (float32 only)") \
    XX(BAD_SHAPE, -17, "operand dimensions are missing, zero, or do not fit the operation") \
    XX(BAD_LIFETIME, -18, "an operand has an unknown or inappropriate lifetime")          \
    XX(BAD_OPERAND_LOCATION, -19,                                                          \
       "a constant operand's location (pool, offset, length) is out of range or the wrong size") \
    XX(BAD_OPERATION, -20, "an operation has an unknown type or the wrong number of inputs/outputs") \
    XX(UNSUPPORTED_OPERATION, -21, "the device does not support an operation of this model") \
    XX(BAD_FUSE_CODE, -22, "a fused activation code is not NONE, RELU, RELU1 or RELU6")   \
    XX(BAD_SCALAR, -23, "a scalar parameter is not a constant of the right type, or out of range") \
    XX(BAD_MODEL_IO, -24,                                                                  \
       "model inputs/outputs are inconsistent with operand lifetimes, or an operand is "   \
       "read before it is written, or written twice")                                      \
    XX(BAD_BUFFER, -25, "wrong number of input/output buffers, or a buffer of the wrong size") \
    XX(WRONG_CLOCK, -26, "this call needs the virtual clock")                              \
    XX(NOT_HUNG, -27, "the channel is not hung; nothing to reset")                         \
    XX(DRIVER_LOAD_FAILED, -28, "the driver shared object could not be loaded (dlopen failed)") \
    XX(DRIVER_NO_ENTRY, -29, "the driver shared object exports no npu_driver_entry")       \
    XX(DRIVER_ABI_MISMATCH, -30, "the driver was built against another NPU ABI version")  \
    XX(DRIVER_INCOMPLETE, -31, "the driver's ops table lacks a mandatory callback")        \
    XX(DRIVER_INIT_FAILED, -32, "the driver's init callback failed")                       \
    XX(SYSTEM_ERROR, -33, "an operating-system call failed (eventfd, pthread, clock)")     \
    XX(BUFFER_TOO_SMALL, -34, "the output buffer is too small; the needed size was returned") \
    XX(TOO_MANY, -35, "a fixed limit was reached (devices, channels, models or dimensions)") \
    XX(OFFLINE, -36, "the device is offline (thermal shutdown)")

/* The status codes.  NPU_OK is 0 and means success; every error is negative. */
enum npu_status {
    NPU_OK = 0,
#define NPU_XX_ENUM(name, code, msg) NPU_E_##name = code,
    NPU_ERRNO_MAP(NPU_XX_ENUM)
#undef NPU_XX_ENUM
};

/* A static, English message for any status; never NULL (unknown codes get a
 * generic message).  Thread-safe. */
const char *npu_strerror(int status);

/* The code's name without the NPU_E_ prefix ("WEIGHT_MEMORY_FULL", "OK"), or
 * "UNKNOWN".  Static; thread-safe.  The Python binding maps names to exception
 * classes, so it needs no second copy of the numbers. */
const char *npu_error_name(int status);

#endif /* NPU_ERRORS_H */
