// The subset of android.hardware.neuralnetworks (AIDL) that npuemu serves, in AOSP's names
// and field order. Differences from AOSP are listed in README.md ("Where npuemu differs").
package android.hardware.neuralnetworks;

/**
 * The activation an ADD, SUB, MUL, FULLY_CONNECTED or CONV_2D applies to each element of
 * its result, given as that operation's INT32 scalar input. The NDK's
 * ANEURALNETWORKS_FUSED_* codes have the same names and numbers.
 */
@VintfStability
@Backing(type="int")
enum FusedActivationFunc {
    /** The result as computed. */
    NONE = 0,
    /** max(0, x). */
    RELU = 1,
    /** x clamped to [-1, 1]. */
    RELU1 = 2,
    /** x clamped to [0, 6]. */
    RELU6 = 3,
}
