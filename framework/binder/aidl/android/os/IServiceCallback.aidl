package android.os;

/** Told of registrations of a name (IServiceCallback.aidl). */
oneway interface IServiceCallback {
    void onRegistration(String name, IBinder binder);
}
