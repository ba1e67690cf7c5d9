// The subset of android.hardware.neuralnetworks (AIDL) that npuemu serves, in AOSP's names
// and field order. Differences from AOSP are listed in README.md ("Where npuemu differs").
package android.hardware.neuralnetworks;

import android.hardware.neuralnetworks.Capabilities;
import android.hardware.neuralnetworks.DeviceStatus;
import android.hardware.neuralnetworks.DeviceType;
import android.hardware.neuralnetworks.ExecutionPreference;
import android.hardware.neuralnetworks.Extension;
import android.hardware.neuralnetworks.IPreparedModel;
import android.hardware.neuralnetworks.Model;
import android.hardware.neuralnetworks.ModelLoadToken;
import android.hardware.neuralnetworks.NumberOfCacheFiles;
import android.hardware.neuralnetworks.Priority;

@VintfStability
interface IDevice {
    const int BYTE_SIZE_OF_CACHE_TOKEN = 32;
    const int MAX_NUMBER_OF_CACHE_FILES = 32;

    Capabilities getCapabilities();
    NumberOfCacheFiles getNumberOfCacheFilesNeeded();
    Extension[] getSupportedExtensions();
    boolean[] getSupportedOperations(in Model model);
    DeviceType getType();
    String getVersionString();
    DeviceStatus getStatus();

    // AOSP returns the prepared model through an IPreparedModelCallback; npuemu returns
    // it directly (errors as ServiceSpecificException with an ErrorStatus code).
    // modelSizeBytes is the emulated weight size reserved in device memory. loadToken
    // names the NpuManager request the model is loaded for (null: none named).
    IPreparedModel prepareModel(in Model model, in ExecutionPreference preference,
            in Priority priority, in long deadlineNs, in long modelSizeBytes,
            in @nullable ModelLoadToken loadToken);

    // prepareModel with the compilation cache, as AOSP's prepareModel takes it (npuemu
    // keeps the plain prepareModel above for callers that cache nothing). modelCache and
    // dataCache hold as many writable files as getNumberOfCacheFilesNeeded says (or none:
    // no caching), token is BYTE_SIZE_OF_CACHE_TOKEN bytes; after preparing, the driver
    // may write into the files what prepareModelFromCache needs to prepare the same model
    // again. Failing to write them never fails the preparation.
    IPreparedModel prepareModelWithCache(in Model model, in ExecutionPreference preference,
            in Priority priority, in long deadlineNs, in long modelSizeBytes,
            in @nullable ModelLoadToken loadToken, in ParcelFileDescriptor[] modelCache,
            in ParcelFileDescriptor[] dataCache, in byte[] token);

    // AOSP's prepareModelFromCache: the model prepared again from the files a
    // prepareModelWithCache with the same token wrote. A cache the driver cannot use
    // (missing, truncated, corrupt, another token, device or driver version) is
    // GENERAL_FAILURE, and the runtime prepares the model in full instead. npuemu adds
    // the emulated size and the load token, as prepareModel takes them.
    IPreparedModel prepareModelFromCache(in long deadlineNs, in ParcelFileDescriptor[] modelCache,
            in ParcelFileDescriptor[] dataCache, in byte[] token, in long modelSizeBytes,
            in @nullable ModelLoadToken loadToken);
}
