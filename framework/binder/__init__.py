"""framework.binder: trio IPC with AIDL-defined interfaces and msgpack parcelables."""
