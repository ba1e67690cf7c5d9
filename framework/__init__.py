"""framework: the binder, system_server, and the app-side APIs."""
