/*
 * Broken: hangs inside execute.  Every submission blocks forever inside the
 * driver callback (holding the system's lock, as a driver spinning on a
 * register that never flips would).  vts must report a hang on each check that
 * runs an inference, within its per-check timeout, restart the HAL, and pass
 * the others.
 */
#include "broken.h"

static int hanging_submit(void *d, const struct npu_work_request *q, int32_t *work_id)
{
    (void)d;
    (void)q;
    (void)work_id;
    volatile int forever = 1;
    while (forever)
        pause();
    return NPU_E_NOT_SUPPORTED;  /* never reached */
}

BROKEN_DRIVER(ops.submit_work = hanging_submit)
