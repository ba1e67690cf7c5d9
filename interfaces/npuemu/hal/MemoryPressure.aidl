package npuemu.hal;

/** A device's weight memory and SRAM right after a load, an unload or a refused load. */
parcelable MemoryPressure {
    /** The driver device whose load or unload caused it, -1 if unknown. */
    int deviceNumber;
    /** The hardware device whose memory this is (a heterogeneous device shares its parts'). */
    int hwDevice;
    long weightMemoryUsed;
    long weightMemoryTotal;
    long sramUsed;
    long sramTotal;
    /** The C error name of a refused load (e.g. "WEIGHT_MEMORY_FULL"), null otherwise. */
    @nullable String refused;
    long timeNs;
}
