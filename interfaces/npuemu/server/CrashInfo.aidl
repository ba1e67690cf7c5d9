package npuemu.server;

/**
 * An app's uncaught exception, as its process reports it to the activity manager:
 * Android's ApplicationErrorReport.CrashInfo, the fields npuemu fills.
 */
parcelable CrashInfo {
    /** The exception's class: "SyntaxError", "FileNotFoundError", "RuntimeError". */
    String exceptionClassName;
    /** Its message (str(exception)), possibly empty. */
    String exceptionMessage;
    /** The file and line where it was raised (of a SyntaxError: where the bad syntax is). */
    String throwFileName;
    int throwLineNumber;
    /** The whole traceback, as the app logged it under AndroidRuntime. */
    String stackTrace;
}
