package npuemu.server;

import npuemu.server.CrashInfo;
import npuemu.server.WaitResult;

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

    /**
     * The calling app process is up: its code loaded and its main(context) run to its
     * first await (ActivityThread's attachApplication and the first activity's resume,
     * in one). Only a process the activity manager launched may call it.
     */
    void attachApplication();

    /**
     * The calling app process is dying of an uncaught exception
     * (ActivityManager.handleApplicationCrash). Only for the caller's own process.
     */
    void handleApplicationCrash(in CrashInfo crashInfo);

    /**
     * Wait until the app process pid (as startApp returned it) is up, has crashed or
     * has died, or timeoutMs has passed, as `am start -W` does. System, root and shell.
     */
    WaitResult waitForAppStart(int pid, long timeoutMs);
}
