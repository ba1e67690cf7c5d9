package npuemu.hal;

import android.hardware.npu.WorkInfo;

/**
 * One work event as the HAL read it from the driver, kept for traces and tools
 * (`npuemu run-test-inference`, the Perfetto trace). Unlike what ISchedulingCallback
 * sends, nothing here is debounced: every requested, started and ended is recorded.
 */
parcelable WorkEvent {
    const int KIND_REQUESTED = 0;
    const int KIND_STARTED = 1;
    const int KIND_ENDED = 2;

    /** KIND_REQUESTED, KIND_STARTED or KIND_ENDED. */
    int kind;
    /** StartReason for KIND_STARTED, EndReason for KIND_ENDED, -1 for KIND_REQUESTED. */
    int reason;
    /** The WorkInfo as the callback would get it (info.id is the HAL-wide event id). */
    WorkInfo info;
    /** The driver's own work id: the same for every event of one execution. */
    long workId;
    /** Emulated time of the event, in nanoseconds since the driver opened. */
    long timeNs;
    /** Execution channel of a start or an end, -1 when none (a request, an end in the queue). */
    int channel;
    /** Hardware device index of the channel, -1 when none. */
    int hwDevice;
    /** The IDevice instance name of info.deviceNumber. */
    String deviceName;
}
