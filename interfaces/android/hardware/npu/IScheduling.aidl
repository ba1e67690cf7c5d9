package android.hardware.npu;

import android.hardware.npu.ISchedulingCallback;
import android.hardware.npu.SchedulingConfig;

/**
 * The NPU scheduling HAL (instance android.hardware.npu.IScheduling/default): the
 * framework tells the driver how to prioritise each uid's work and listens to what
 * the work does.
 */
@VintfStability
interface IScheduling {
    /** The highest priority: lower numbers run first. */
    const int MIN_PRIORITY = 0;
    /** The lowest priority, also given to a uid that has no config. */
    const int MAX_PRIORITY = 1000;

    /**
     * Replaces every config. An invalid config or a uid given twice is
     * EX_ILLEGAL_ARGUMENT, and nothing changes.
     */
    void setSchedulingConfigs(in SchedulingConfig[] configs);

    /** Replaces or adds the config of each uid given; others stay. */
    void updateSchedulingConfigs(in SchedulingConfig[] configs);

    /** The one callback; a later call replaces it, null removes it. */
    void setCallback(in @nullable ISchedulingCallback callback);
}
