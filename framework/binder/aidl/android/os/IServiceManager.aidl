package android.os;

import android.os.IServiceCallback;

/**
 * The binder name registry (libbinder's IServiceManager), served as object 0 of the
 * servicemanager process at the well-known socket "servicemanager".
 *
 * npuemu adds the one thing a kernel binder driver would otherwise provide: the
 * record of which uid each process runs as. A launcher (uid 0 or 1000) registers
 * every process it starts before that process serves, and every runtime asks here
 * for the uid of a peer that connects to it.
 */
interface IServiceManager {
    /** Dump priorities of addService/listServices (IServiceManager.aidl). */
    const int DUMP_FLAG_PRIORITY_CRITICAL = 1;
    const int DUMP_FLAG_PRIORITY_HIGH = 2;
    const int DUMP_FLAG_PRIORITY_NORMAL = 4;
    const int DUMP_FLAG_PRIORITY_DEFAULT = 8;
    const int DUMP_FLAG_PRIORITY_ALL = 15;

    /** The service registered as name, or null. npuemu does not poll: see waitForService. */
    @nullable IBinder getService(String name);

    /** The service registered as name, or null, at once. */
    @nullable IBinder checkService(String name);

    /** Register (or, by its owner, replace) a service. Only system uids may. */
    void addService(String name, IBinder service, boolean allowIsolated, int dumpPriority);

    /** Every registered name whose dump priority matches, sorted. */
    String[] listServices(int dumpPriority);

    /** callback.onRegistration(name, binder) now if name is registered, and on every later registration. */
    void registerForNotifications(String name, IServiceCallback callback);

    void unregisterForNotifications(String name, IServiceCallback callback);

    /** Block until name is registered, or timeoutMs pass (then null). */
    @nullable IBinder waitForService(String name, long timeoutMs);

    /** npuemu: the calling launcher (uid 0 or 1000) vouches that its child pid runs as uid. */
    void registerProcess(int pid, int uid);

    /** npuemu: the uid recorded for pid, 2000 for the shell token's holder, or -1. */
    int getUidForPid(int pid, @nullable String shellToken);
}
