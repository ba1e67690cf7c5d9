package android.npumanager;

import android.npumanager.IModelLoadCallback;
import android.npumanager.ModelLoadRequestParcelable;
import android.npumanager.PolicyParams;

/**
 * The npu service (registered as "npu"): AOSP's INpuManagerService.
 *
 * Every method needs android.permission.ACCESS_NPU_MODEL_MANAGER_API (else
 * EX_SECURITY). A request is named by (calling uid, request id). Wrong calls are
 * IllegalArgumentException (bad size, priority, duplicate id, bad policy bundle) or
 * IllegalStateException (a notify or cancel for a request that has ended, or was
 * never approved), and change nothing.
 */
interface INpuManager {
    /** File a request; the answer comes later, through callback. */
    void canLoadModel(in ModelLoadRequestParcelable request, IModelLoadCallback callback);

    /** End a request (any state) with CANCELLED. */
    void cancelModelLoad(in ModelLoadRequestParcelable request);

    /** The approved request's model is now in driver memory. */
    void notifyModelLoaded(in ModelLoadRequestParcelable request);

    /** The model was released; the request ends COMPLETE. */
    void notifyModelUnloaded(in ModelLoadRequestParcelable request);

    /** NPU_MODEL_POLICY_* with its parameters; refused parameters keep the old policy. */
    void setPolicy(int policy, in @nullable PolicyParams params);

    /** npuemu: `dumpsys npu [--json]` (DUMP permission: system, root, shell). */
    String dump(in String[] args);

    /** npuemu: `cmd npu ARGS...` (AOSP's handleShellCommand); returns what it prints. */
    String shellCommand(in String[] args);
}
