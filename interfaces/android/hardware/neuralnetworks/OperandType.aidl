// The subset of android.hardware.neuralnetworks (AIDL) that npuemu serves, in AOSP's names
// and field order. Differences from AOSP are listed in README.md ("Where npuemu differs").
package android.hardware.neuralnetworks;

// Only the float32 subset is computed by the emulated hardware; the others are named
// so that capabilities and validation can speak of them.
@VintfStability
@Backing(type="int")
enum OperandType {
    FLOAT32 = 0,
    INT32 = 1,
    UINT32 = 2,
    TENSOR_FLOAT32 = 3,
    TENSOR_INT32 = 4,
    TENSOR_QUANT8_ASYMM = 5,
    BOOL = 6,
}
