package npuemu.server;

import npuemu.server.CrashInfo;

/**
 * How an app's start ended, as `am start -W` waits for it: Android's WaitResult, with
 * npuemu's outcomes. An app is up once its code is loaded and its main(context) has
 * run to its first await.
 */
parcelable WaitResult {
    /** The app is up. */
    const int START_SUCCESS = 0;
    /** It raised before it was up; crashInfo says what. */
    const int START_CRASHED = 1;
    /** Its process died before it was up, with no crash report (killed, or it failed before its binder opened). */
    const int START_DIED = 2;
    /** Neither within the wait; it may still come up. */
    const int START_TIMED_OUT = 3;

    int result;
    int pid;
    /** From the launch to the outcome, in ms (the wait so far on a timeout). */
    long totalTimeMs;
    /** The process's exit status on START_DIED and START_CRASHED when it has exited, else 0. */
    int exitStatus;
    /** What was raised, on START_CRASHED. */
    @nullable CrashInfo crashInfo;
}
