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
    /*
     * npuemu gives the band's top a default of MAX_PRIORITY + MAX_PRIORITY (2000, the
     * largest effective priority), so that a config naming only uid and appPriority
     * does not clamp every job to 0. The wire form is the seed's six fields unchanged.
     */
    int maxPriority = 2000;
    int uid;
    int appPriority;
    boolean hasDirectAccess;
    boolean canAttributeOtherUid;
}
