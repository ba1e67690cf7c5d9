package android.hardware.npu;

@VintfStability
@Backing(type="byte")
enum EndReason {
    /** NPU_END_REASON_CANCELLED_USER: the client cancelled it. */
    CANCELLED_USER,
    /** NPU_END_REASON_CANCELLED_SYSTEM: system policy preempted it. */
    CANCELLED_SYSTEM,
    /** NPU_END_REASON_PAUSED: suspended for higher-priority work; it will resume. */
    PAUSED,
    /** NPU_END_REASON_FAILED: an execution or driver error. */
    FAILED,
    /** NPU_END_REASON_COMPLETED: it ran to the end. */
    COMPLETED,
}
