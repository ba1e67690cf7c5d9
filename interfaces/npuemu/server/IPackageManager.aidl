package npuemu.server;

/** system_server's package manager, npuemu's private face of it. */
interface IPackageManager {
    /** Install the app in dir (its AndroidManifest.xml). System, root or shell. Returns its uid. */
    int installPackage(String dir);

    /** The packages of uid (one for an app, none for others). */
    String[] getPackagesForUid(int uid);

    /** PERMISSION_GRANTED (0) or PERMISSION_DENIED (-1). */
    int checkPermission(String permission, int uid);

    /** The app's folder (where its main.py lives). */
    String getCodePath(String packageName);

    /** `dumpsys package [--json]`. */
    String dump(in String[] args);
}
