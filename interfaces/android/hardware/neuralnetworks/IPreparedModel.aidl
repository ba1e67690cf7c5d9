// The subset of android.hardware.neuralnetworks (AIDL) that npuemu serves, in AOSP's names
// and field order. Differences from AOSP are listed in README.md ("Where npuemu differs").
package android.hardware.neuralnetworks;

import android.hardware.neuralnetworks.ExecutionHints;
import android.hardware.neuralnetworks.IBurst;
import android.hardware.neuralnetworks.ExecutionResult;
import android.hardware.neuralnetworks.Request;

@VintfStability
interface IPreparedModel {
    const long DEFAULT_LOOP_TIMEOUT_DURATION_NS = 2000000000;
    const long MAXIMUM_LOOP_TIMEOUT_DURATION_NS = 15000000000;

    ExecutionResult executeSynchronously(in Request request, in boolean measureTiming,
            in long deadlineNs, in long loopTimeoutDurationNs);

    // npuemu: the same, carrying the scheduling hints of the work.
    ExecutionResult executeWithHints(in Request request, in boolean measureTiming,
            in long deadlineNs, in ExecutionHints hints);

    // npuemu: frees the model in driver memory now, rather than when the last
    // reference to this object goes away.
    void release();

    // A burst of executions of this model (AOSP's configureExecutionBurst; it ends with
    // the prepared model).
    IBurst configureExecutionBurst();
}
