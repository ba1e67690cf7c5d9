// The subset of android.hardware.neuralnetworks (AIDL) that npuemu serves, in AOSP's names
// and field order. Differences from AOSP are listed in README.md ("Where npuemu differs").
package android.hardware.neuralnetworks;

@VintfStability
@Backing(type="int")
enum OperationType {
    ADD = 0,
    CONV_2D = 3,
    FULLY_CONNECTED = 9,
    MUL = 18,
    RELU = 19,
    SOFTMAX = 25,
    SUB = 36,
}
