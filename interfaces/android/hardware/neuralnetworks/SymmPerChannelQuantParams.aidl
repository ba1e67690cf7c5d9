// The subset of android.hardware.neuralnetworks (AIDL) that npuemu serves, in AOSP's names
// and field order. Differences from AOSP are listed in README.md ("Where npuemu differs").
package android.hardware.neuralnetworks;

// The quantization of a TENSOR_QUANT8_SYMM_PER_CHANNEL operand: one scale per index of
// dimension channelDim (real = stored * scales[i], no zero point).
@VintfStability
parcelable SymmPerChannelQuantParams {
    float[] scales;
    int channelDim;
}
