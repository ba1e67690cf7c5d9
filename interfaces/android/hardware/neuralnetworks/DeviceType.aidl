// The subset of android.hardware.neuralnetworks (AIDL) that npuemu serves, in AOSP's names
// and field order. Differences from AOSP are listed in README.md ("Where npuemu differs").
package android.hardware.neuralnetworks;

@VintfStability
@Backing(type="int")
enum DeviceType {
    OTHER = 1,
    CPU = 2,
    GPU = 3,
    ACCELERATOR = 4,
}
