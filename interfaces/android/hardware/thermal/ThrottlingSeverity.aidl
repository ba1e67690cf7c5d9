package android.hardware.thermal;

/**
 * The thermal HAL's severity scale, as the emulated die reports it: how hard the
 * device throttles, from not at all to about to power off.
 */
@VintfStability
@Backing(type="int")
enum ThrottlingSeverity {
    /** No throttling. */
    NONE = 0,
    /** Light throttling; the user does not notice. */
    LIGHT,
    /** Moderate throttling; the user may notice. */
    MODERATE,
    /** Severe throttling; the user notices. */
    SEVERE,
    /** The platform sheds what it can to cool down. */
    CRITICAL,
    /** Key components shut down; the device is about to. */
    EMERGENCY,
    /** The device shuts down at once. */
    SHUTDOWN,
}
