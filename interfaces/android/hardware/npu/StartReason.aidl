package android.hardware.npu;

@VintfStability
@Backing(type="byte")
enum StartReason {
    /** NPU_START_REASON_INITIAL: the work's first run. */
    INITIAL,
    /** NPU_START_REASON_RESUMED: running again after it was preempted. */
    RESUMED,
}
