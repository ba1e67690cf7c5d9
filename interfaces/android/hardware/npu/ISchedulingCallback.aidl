package android.hardware.npu;

import android.hardware.npu.EndReason;
import android.hardware.npu.StartReason;
import android.hardware.npu.WorkInfo;

/**
 * Events about NPU work, from the driver's HAL to the framework. Duplicates are
 * debounced: onWorkRequested is suppressed when the same uid finished work within
 * DEBOUNCE_DURATION_MS or already has work running, and onWorkEnded is sent only once
 * the uid has made no new request for that long.
 */
@VintfStability
oneway interface ISchedulingCallback {
    const int DEBOUNCE_DURATION_MS = 50;

    /** The vendor service queued the work. */
    void onWorkRequested(in WorkInfo workInfo);

    /** The work began to execute (INITIAL) or resumed after preemption (RESUMED). */
    void onWorkStarted(in WorkInfo workInfo, in StartReason reason);

    /** The work stopped executing; see EndReason. */
    void onWorkEnded(in WorkInfo workInfo, in EndReason reason);
}
