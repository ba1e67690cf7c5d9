package npuemu.hal;

import npuemu.hal.MemoryPressure;

/** What system_server's thermal service (and tools) hear from the HAL. */
oneway interface IHalListener {
    /** The die crossed a threshold (severity as the thermal HAL numbers it). */
    void onThermalSeverityChanged(int severity, float temperatureC);
    /** A device's memory changed. */
    void onMemoryPressure(in MemoryPressure pressure);
}
