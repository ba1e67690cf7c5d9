// The subset of android.hardware.neuralnetworks (AIDL) that npuemu serves, in AOSP's names
// and field order. Differences from AOSP are listed in README.md ("Where npuemu differs").
package android.hardware.neuralnetworks;

// AOSP's pools are a union Memory; here each pool is a SharedMemory (a memfd).
import android.hardware.neuralnetworks.Subgraph;

@VintfStability
parcelable Model {
    Subgraph main;
    Subgraph[] referenced;
    byte[] operandValues;
    SharedMemory[] pools;
    boolean relaxComputationFloat32toFloat16;
}
