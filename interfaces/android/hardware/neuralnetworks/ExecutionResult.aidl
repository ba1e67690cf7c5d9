// The subset of android.hardware.neuralnetworks (AIDL) that npuemu serves, in AOSP's names
// and field order. Differences from AOSP are listed in README.md ("Where npuemu differs").
package android.hardware.neuralnetworks;

import android.hardware.neuralnetworks.OutputShape;
import android.hardware.neuralnetworks.Timing;

@VintfStability
parcelable ExecutionResult {
    boolean outputSufficientSize;
    OutputShape[] outputShapes;
    Timing timing;
}
