package android.hardware.npu;

import android.hardware.npu.NpuUuid;

/** One NPU execution group, as the driver reports its life to the framework. */
@VintfStability
parcelable WorkInfo {
    /** Increases monotonically over the life of the HAL. */
    int id;
    @nullable NpuUuid groupId;
    int uid;
    int debugPid;
    int originalUid;
    @nullable String debugFeatureId;
    /** As submitted, 0..1000; lower runs first. */
    int jobPriority;
    /** The uid's priority plus jobPriority, 0..2000. */
    int effectivePriority;
    /** CLOCK_MONOTONIC, in milliseconds. */
    long timestampMs;
    /** Counts from 0. */
    int deviceNumber;
}
