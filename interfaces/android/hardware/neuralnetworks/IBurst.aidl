// The subset of android.hardware.neuralnetworks (AIDL) that npuemu serves, in AOSP's names
// and field order. Differences from AOSP are listed in README.md ("Where npuemu differs").
package android.hardware.neuralnetworks;

import android.hardware.neuralnetworks.ExecutionResult;
import android.hardware.neuralnetworks.Request;

// A burst of executions of one prepared model (IPreparedModel.configureExecutionBurst):
// the driver may keep what it reuses between them, the request pools above all.
@VintfStability
interface IBurst {
    // IPreparedModel.executeSynchronously, with one memoryIdentifierToken per pool of
    // the request: a token (>= 0) names the same memory every time the client sends it,
    // so the driver may map that memory once and find the mapping again by the token;
    // -1 asks for no caching. One execution at a time: calls run in order.
    ExecutionResult executeSynchronously(in Request request, in long[] memoryIdentifierTokens,
            in boolean measureTiming, in long deadlineNs, in long loopTimeoutDurationNs);

    // The client will not send the memory of this token again: drop what is kept for it.
    void releaseMemoryResource(in long memoryIdentifierToken);
}
