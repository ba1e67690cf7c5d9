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
}
