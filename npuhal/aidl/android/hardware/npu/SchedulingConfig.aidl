/*
 * The seed's SchedulingConfig, as the NPU Manager page gives it. AOSP's has a single
 * `priority`; npuemu keeps the seed's min/max/app priorities.
 */
package android.hardware.npu;

/**
 * How the driver should treat one uid's work: the priority band its jobs may use,
 * the app's own priority, and what it is allowed to do.
 */
@VintfStability
parcelable SchedulingConfig {
    int minPriority;
    int maxPriority;
    int uid;
    int appPriority;
    boolean hasDirectAccess;
    boolean canAttributeOtherUid;
}
