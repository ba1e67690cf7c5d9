// The subset of android.hardware.neuralnetworks (AIDL) that npuemu serves, in AOSP's names
// and field order. Differences from AOSP are listed in README.md ("Where npuemu differs").
package android.hardware.neuralnetworks;

import android.hardware.neuralnetworks.SymmPerChannelQuantParams;

// AOSP's OperandExtraParams is a union (channelQuant, or an extension's bytes). npuemu's
// AIDL compiler has no unions and npuemu no extensions: this parcelable holds the one arm
// npuemu uses; an Operand without extra parameters has no OperandExtraParams at all.
@VintfStability
parcelable OperandExtraParams {
    SymmPerChannelQuantParams channelQuant;
}
