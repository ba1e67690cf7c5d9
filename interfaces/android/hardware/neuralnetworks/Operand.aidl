// The subset of android.hardware.neuralnetworks (AIDL) that npuemu serves, in AOSP's names
// and field order. Differences from AOSP are listed in README.md ("Where npuemu differs").
package android.hardware.neuralnetworks;

import android.hardware.neuralnetworks.DataLocation;
import android.hardware.neuralnetworks.OperandExtraParams;
import android.hardware.neuralnetworks.OperandLifeTime;
import android.hardware.neuralnetworks.OperandType;

@VintfStability
parcelable Operand {
    OperandType type = OperandType.FLOAT32;
    int[] dimensions;
    float scale;
    int zeroPoint;
    OperandLifeTime lifetime = OperandLifeTime.TEMPORARY_VARIABLE;
    DataLocation location;
    @nullable OperandExtraParams extraParams;
}
