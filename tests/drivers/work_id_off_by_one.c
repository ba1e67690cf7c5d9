/*
 * Broken: a work-id bug.  The driver numbers works itself, from 0, and returns
 * that number from submit_work, while the hardware (whose events the HAL hears)
 * numbers them from 1: the HAL waits for a work whose end never comes.  vts must
 * say so, on every check that runs work, rather than "the driver hangs".
 */
#include "broken.h"

static int32_t next_own_id;

static int own_id_submit(HW_SUBMIT_PARAMS);
BROKEN_HW_INIT(broken_hw.submit = own_id_submit)

static int own_id_submit(HW_SUBMIT_PARAMS)
{
    int32_t hw_id;
    int rc = real_hw->submit(hw, handle, key, info, inputs, input_shapes, input_count, outputs, output_shapes, output_count, &hw_id);
    if (rc == NPU_OK)
        *work_id = next_own_id++;
    return rc;
}

BROKEN_DRIVER(ops.init = broken_init)
