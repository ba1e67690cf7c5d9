package npuemu.server;

/**
 * system_server's activity manager, npuemu's private face of it (`npuemu am`).
 *
 * Launching, killing and setting importance are for the system, root and the shell;
 * anyone may ask an importance.
 */
interface IActivityManager {
    /**
     * Start the installed package's process (its main.py) at importance (0: the
     * manifest's npuemu.launch.importance). Returns its pid.
     */
    int startApp(String packageName, int importance);

    /** ActivityManager importance of a running app (100 foreground .. 400 cached). */
    void setImportance(String packageName, int importance);

    /** Kill the app's process; the npu service hears of its death as of any other. */
    void killApp(String packageName);

    /** The uid's importance, 1000 (gone) when it does not run. */
    int getUidImportance(int uid);

    /** `dumpsys activity [--json]`. */
    String dump(in String[] args);
}
