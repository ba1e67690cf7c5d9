"""Work events say where they happened: the hardware device and its channel.

Traces draw one track per execution channel from these two fields.
"""

import npuhal
from npuhal import DeviceType, WorkEnded, WorkRequested, WorkStarted

from test_driver_sched import LONG, by_type, fc_model, x_input


async def test_two_concurrent_jobs_on_the_npu_run_on_its_two_channels():
    async with npuhal.open_driver() as driver:
        npu = by_type(driver, DeviceType.ACCELERATOR)
        assert npu.channels == 2
        handle = driver.load_model(npu, fc_model(), cost_scale=LONG)
        works = [driver.submit(handle, [x_input(seed)], uid=10001, job_priority=500) for seed in (1, 2)]
        driver.run_until_idle()
        events = [e for e in driver.drain_events() if isinstance(e, (WorkRequested, WorkStarted, WorkEnded))]
        for e in events:
            if isinstance(e, WorkRequested):
                assert e.channel == -1
            else:
                assert 0 <= e.channel < npu.channels and e.hw_device >= 0
        started = {e.info.id: e for e in events if isinstance(e, WorkStarted)}
        ended = {e.info.id: e for e in events if isinstance(e, WorkEnded)}
        assert sorted(started[w].channel for w in works) == [0, 1]
        assert all(ended[w].channel == started[w].channel for w in works)
        assert started[works[0]].hw_device == started[works[1]].hw_device
