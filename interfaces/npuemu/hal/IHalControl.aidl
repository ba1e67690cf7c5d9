package npuemu.hal;

import npuemu.hal.IHalListener;
import npuemu.hal.ThermalStatus;
import npuemu.hal.WorkEvent;

/**
 * npuemu's private control of the vendor HAL (instance npuemu.hal.IHalControl/default).
 *
 * What the emulator needs and the public HALs do not offer lives here, so that
 * android.hardware.npu and android.hardware.neuralnetworks stay as AOSP and the seeds
 * define them. Who may call what is written at each method: "system" means the
 * system uid (1000) or root (0); "shell" adds uid 2000, the person at the terminal.
 */
interface IHalControl {
    /** injectFault kinds. arg is unused unless said. */
    const int FAULT_FAIL_NEXT_WORK = 1;
    /** arg: the channel to hang (until resetChannel, or the watchdog). */
    const int FAULT_HANG_CHANNEL = 2;
    /** arg: degrees C added to the die temperature (negative cools). */
    const int FAULT_HEAT_SPIKE = 3;
    /** The driver aborts the HAL process, as a driver bug would. */
    const int FAULT_CRASH = 4;

    /**
     * System only. Frees every prepared model of uid in the driver; their later
     * executions fail with ServiceSpecificException(GENERAL_FAILURE). Returns how many.
     * (The npu service calls it when an app dies.)
     */
    int revokeUidModels(int uid);

    /**
     * System only. The unload deadline of uid's NpuManager request requestId passed:
     * frees that request's prepared models (the ones prepareModel was given its
     * ModelLoadToken for) and every other model of uid that is not filed under one of
     * keepRequestIds, the uid's other requests the npu service still honours. So a
     * well-behaved model of the same app lives on, and an app cannot shelter a model
     * from revocation by naming no request, or one the service does not know.
     * Later executions of the freed models fail with ServiceSpecificException
     * (GENERAL_FAILURE). requestId in keepRequestIds is an IllegalArgumentException.
     * Returns how many were freed.
     */
    int revokeRequestModels(int uid, int requestId, in int[] keepRequestIds);

    /** System or shell. One FAULT_* on the named IDevice instance. */
    void injectFault(String device, int kind, double arg);

    /** System or shell. Un-hang a channel: its stuck work ends FAILED. */
    void resetChannel(String device, int channel);

    /** Anyone. The die's temperature, severity and thresholds. */
    ThermalStatus thermalStatus();

    /**
     * System or shell (a heat spike: the demo's). Moves the die temperature to the
     * middle of severity's band (computed from the driver's thresholds); the die then
     * heats and cools from there as the thermal model says (or, while an override
     * holds it, is held there).
     */
    ThermalStatus setThermalSeverity(int severity);

    /**
     * System or shell (`npuemu thermal set`): a thermal override, as
     * `cmd thermalservice override-status` on a phone. Holds the die at the middle of
     * severity's band until resetThermalOverride (or another override moves it): it
     * neither heats with load nor cools at rest, so the driver throttles, and the
     * listeners hear, that severity until then.
     */
    ThermalStatus overrideThermalSeverity(int severity);

    /**
     * System or shell (`npuemu thermal reset`, as `cmd thermalservice reset`): releases
     * the override; the die heats and cools from where it was held. Harmless when no
     * override holds it.
     */
    ThermalStatus resetThermalOverride();

    /** System or shell. The driver's dump and the HAL's state, for people. */
    String dump();

    /** System only. Thermal severity changes and memory pressure; a dead listener is dropped. */
    void registerListener(IHalListener listener);
    void unregisterListener(IHalListener listener);

    /**
     * System or shell. The latest work events read from the driver (up to max, oldest
     * first), undebounced, with their times, channel and device. A call with sinceId
     * >= 0 gets only events whose info.id is greater.
     */
    WorkEvent[] recentWorkEvents(int max, long sinceId);

    /**
     * One small fixed inference (a FULLY_CONNECTED layer costing a few hundred emulated
     * milliseconds) on deviceName ("" for the first accelerator), as the caller's uid,
     * with the given job priority and originalUid (-1: none). Returns the work events
     * it caused, once it has ended.
     *
     * asUid (-1: the caller) runs it as another uid; only root, system and the shell
     * may: the shell is the person at the terminal, who on an eng build could `su` to
     * any uid anyway. Any other caller asking for another uid gets a SecurityException.
     * Refusals of the work itself (no direct access, attribution) are SecurityException.
     */
    WorkEvent[] runTestInference(int jobPriority, int originalUid, String deviceName, int asUid);

    /**
     * Anyone. The IDevice instance names of the devices a heterogeneous device (type
     * OTHER) manages, each also served on its own; empty for any other device. A part
     * whose name is invalid (and so is not served) is listed as "#<driver number>".
     */
    String[] getDeviceParts(String device);
}
