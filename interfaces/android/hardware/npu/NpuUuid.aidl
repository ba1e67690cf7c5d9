package android.hardware.npu;

/** A 128-bit identifier of an NPU execution group (AOSP calls this type Uuid). */
@VintfStability
parcelable NpuUuid {
    /** The 16 bytes, most significant first (RFC 4122 order). */
    byte[16] uuid;
}
