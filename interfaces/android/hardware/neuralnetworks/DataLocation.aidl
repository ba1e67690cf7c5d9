// The subset of android.hardware.neuralnetworks (AIDL) that npuemu serves, in AOSP's names
// and field order. Differences from AOSP are listed in README.md ("Where npuemu differs").
package android.hardware.neuralnetworks;

@VintfStability
parcelable DataLocation {
    int poolIndex;
    long offset;
    long length;
    long padding;
}
