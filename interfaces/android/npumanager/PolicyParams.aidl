package android.npumanager;

/**
 * setPolicy's PersistableBundle, as npuemu's binder carries it (its AIDL has no Bundle).
 *
 * keys lists every key the caller's bundle had, so that the service refuses a key it
 * does not know (a misspelt "maxbudget") instead of silently using the default. The
 * two known keys are AOSP's: "maxBudget" and "modelSizeWeights".
 */
parcelable PolicyParams {
    String[] keys;
    boolean hasMaxBudget;
    int maxBudget;
    /** Weights of the three size classes (<1GB, 1-2GB, >2GB), or null for the defaults. */
    @nullable int[] modelSizeWeights;
}
