"""interfaces: every AIDL file of npuemu, and the Python modules compiled from them.

The one vocabulary of the stack, as Android's ``hardware/interfaces`` and the
framework's ``.aidl`` files are: the HAL (``npuhal``), system_server, the app-side
libraries and the tools all import their enums, parcelables and interfaces from here,
and nothing writes them again by hand.

- ``android/hardware/neuralnetworks/``: the NN HAL (``IDevice``, ``IPreparedModel``,
  ``Model`` and the operand and operation vocabulary).
- ``android/hardware/npu/``: the NPU scheduling HAL (``IScheduling``, ``WorkInfo``...).
- ``android/hardware/thermal/``: the thermal HAL's ``ThrottlingSeverity``.
- ``android/npumanager/``: the NPU Manager's binder API.
- ``npuemu/hal/``: the HAL's private control interface (thermal, memory, events).
- ``npuemu/server/``: system_server's private interfaces (activity, package, thermal).
- ``services``: the names services register under with the servicemanager (the HAL's
  instances, system_server's services), written once here for every layer; and
  ``c_enums``: how the C headers spell the enums, and the import-time check that they
  spell them as the AIDL does (both C extensions use it). The two hand-written modules
  of the tree.

A new ``.aidl`` file goes in the directory its package names; ``make aidl`` (that is,
``npuemu aidl``) compiles each package's files into that directory's ``__init__.py``,
which is committed, so a reviewer reads the code the stack runs, and
``tests/test_binder_aidlc.py`` fails while any module is stale. This package imports
only ``framework.binder``.
"""
