"""framework: the binder, system_server, and the app-side APIs.

General layout (read bottom up, as DESIGN.md's table; a folder imports only the
ones it names, never another's private ``_x`` module, and no import hides in a
function to dodge a cycle: ``tests/test_layering.py`` holds the same table and
checks every import of the tree):

- ``binder/``: the IPC (sans-IO wire, transports, Binder objects, the AIDL
  compiler and parcel codec, death notices, calling identity, servicemanager).
  Imports nothing of npuemu.
- (beside the framework) ``interfaces``: every ``.aidl`` file and the modules
  compiled from it, the one vocabulary. Imports ``binder``.
- ``npumanager/``: the app-side NpuManager API and its constants. Imports
  ``binder``, ``interfaces``.
- ``nn/``: the app-side NNAPI runtime (discovery, compilation, partitioning,
  execution, the CPU device). Imports ``binder``, ``interfaces``.
- ``server/``: system_server: the ``npu`` service and its policies, activity,
  package and thermal services. Imports ``binder``, ``interfaces``, ``npumanager``.
- ``app/``: the app process and its ``Context``. Imports ``binder``,
  ``interfaces``, ``npumanager``, ``nn``.
- ``emulator/``: ``open_stack``, the one assembly of a stack (real processes under
  init, or one process over the in-memory binder), and driving whole emulators (logcat,
  traces, the demo). Imports everything above and ``npuhal``.
- ``lab/``: the scheduling lab. Imports everything above (its whole-stack runs
  are ``emulator``'s ``open_stack``), and ``npuhal``.
- ``vts/``: the tools side: the conformance suite ``npuemu vts`` runs against a
  driver and the HAL on it. What judges a layer lives outside it: it imports everything
  above but ``lab``, and ``npuhal``.
- ``cli/``: the click command ``npuemu``, a thin face of the above. Imports all of
  them.

Beside the framework: ``npuhal`` (the vendor HAL; imports only ``binder`` and
``interfaces``), ``apps`` (sample apps; only ``app``, ``npumanager``, ``nn`` and ``binder``'s
exceptions), ``bench`` (anything public) and ``tests`` (anything).
"""
