// The subset of android.hardware.neuralnetworks (AIDL) that npuemu serves, in AOSP's names
// and field order. Differences from AOSP are listed in README.md ("Where npuemu differs").
package android.hardware.neuralnetworks;

// Ratios to the CPU reference device; lower is better.
@VintfStability
parcelable PerformanceInfo {
    float execTime;
    float powerUsage;
}
