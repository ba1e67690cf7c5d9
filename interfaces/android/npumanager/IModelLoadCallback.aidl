package android.npumanager;

/**
 * The npu service's answers about one request (AOSP's newest IModelLoadCallback: one
 * callback binder per request, so no method needs to say which request it is about).
 *
 * Oneway: the service never waits for an app. The app's NpuManager turns each call into
 * the ModelLoadRequestCallback method of the same name, run on the app's executor.
 */
oneway interface IModelLoadCallback {
    /** NPU_MODEL_LOAD_STATUS_CAN_LOAD_NOW, WAIT_FOR_UNLOAD or NOT_PRIORITIZED. */
    void onCanLoadModel(int status);

    /**
     * Release the model and call notifyModelUnloaded. reason is an
     * NPU_MODEL_UNLOAD_REASON_* (npuemu's; AOSP's callback has no argument).
     */
    void onRequestUnloadModel(int reason);

    /** The request's last word: NPU_MODEL_LOAD_REQUEST_STATUS_CANCELLED or COMPLETE. */
    void onModelLoadRequestComplete(int status);
}
