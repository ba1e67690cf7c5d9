// The subset of android.hardware.neuralnetworks (AIDL) that npuemu serves, in AOSP's names
// and field order. Differences from AOSP are listed in README.md ("Where npuemu differs").
package android.hardware.neuralnetworks;

// npuemu's addition: the android.npumanager request a prepared model is loaded for.
// The app names the request on its compilation (Compilation.setModelLoadRequest) and the
// NNAPI runtime passes it to every prepareModel of that compilation; AOSP would carry such
// a hint as a TokenValuePair in PrepareModelConfig.compilationHints. The HAL files the
// model under (binder calling uid, requestId), so when that request's unload deadline
// passes the npu service can have exactly its models revoked
// (npuemu.hal.IHalControl.revokeRequestModels) and the app's other models live on.
@VintfStability
parcelable ModelLoadToken {
    /** The ModelLoadRequest's id, as the app built it (ModelLoadRequest.Builder(id)). */
    int requestId;
}
