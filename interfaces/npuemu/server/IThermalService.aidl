package npuemu.server;

/** system_server's thermal service: it follows the HAL's die and tells the npu service. */
interface IThermalService {
    /** PowerManager.THERMAL_STATUS_*: NONE 0 .. SHUTDOWN 6. */
    int getCurrentThermalStatus();

    /** `dumpsys thermal [--json]`. */
    String dump(in String[] args);
}
