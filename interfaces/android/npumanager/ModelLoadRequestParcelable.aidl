package android.npumanager;

/**
 * What an app asks the npu service for: AOSP's ModelLoadRequestParcelable.
 *
 * The uid is never a field: the service takes it from the binder (getCallingUid), so
 * an app can speak only for itself. size is an NPU_MODEL_SIZE_* class, priority an
 * NPU_MODEL_PRIORITY_* value (npuemu adds OPPORTUNISTIC = 2000).
 */
parcelable ModelLoadRequestParcelable {
    const int PRIORITY_NORMAL = 0;
    const int PRIORITY_BACKGROUND = 1000;

    /** The app's own id, unique among its live requests. */
    int id;
    /** NPU_MODEL_SIZE_LESS_THAN_1GB = 0, BETWEEN_1GB_AND_2GB = 1, GREATER_THAN_2G = 2. */
    int size;
    int priority;
}
