"""The binder's own AIDL: ``android.os.IServiceManager`` and ``IServiceCallback``.

As libbinder keeps ``IServiceManager.aidl`` beside itself, these stay with the binder
(below the ``interfaces`` tree, which imports the binder). ``make aidl`` compiles each
package's ``.aidl`` files into that directory's ``__init__.py``.
"""
