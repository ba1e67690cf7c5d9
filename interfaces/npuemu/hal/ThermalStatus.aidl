package npuemu.hal;

/** The die's thermal state (the thermal HAL's view of the one NPU die). */
parcelable ThermalStatus {
    /** ThrottlingSeverity: NONE = 0 .. SHUTDOWN = 6. */
    int severity;
    float temperatureC;
    /** Where LIGHT, MODERATE, SEVERE, CRITICAL, EMERGENCY and SHUTDOWN begin. */
    float[] thresholdsC;
    /** An override (IHalControl.overrideThermalSeverity) holds the die until reset. */
    boolean overridden;
}
