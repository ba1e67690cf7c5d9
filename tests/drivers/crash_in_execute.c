/*
 * Broken: crashes inside execute.  Every submission aborts the process, as a
 * driver dereferencing garbage would.  vts must report the HAL's death on
 * each check that runs an inference, restart it, and pass the others.
 */
#include "broken.h"

static int crashing_submit(void *d, const struct npu_work_request *q, int32_t *work_id)
{
    (void)d;
    (void)q;
    (void)work_id;
    abort();
}

BROKEN_DRIVER(ops.submit_work = crashing_submit)
