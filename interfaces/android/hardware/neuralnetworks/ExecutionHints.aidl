// The subset of android.hardware.neuralnetworks (AIDL) that npuemu serves, in AOSP's names
// and field order. Differences from AOSP are listed in README.md ("Where npuemu differs").
package android.hardware.neuralnetworks;

// npuemu's addition: what the NPU scheduling HAL needs to know about one execution.
// AOSP passes such hints as TokenValuePair[] in ExecutionConfig; a typed parcelable is
// clearer and checked. The work's uid is always the binder calling uid.
import android.hardware.npu.NpuUuid;

@VintfStability
parcelable ExecutionHints {
    int jobPriority = 500;
    int originalUid = -1;
    @nullable NpuUuid groupId;
    @nullable String debugFeatureId;
}
