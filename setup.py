# setuptools reads everything from pyproject.toml except cffi_modules, which its
# pyproject schema does not accept; cffi's own docs put it here. The binder's call
# frames (framework/binder/_wirec.c) are a plain CPython extension: they make and
# take Python objects (events, sets, msgpack's callables), which cffi cannot pass.
from setuptools import Extension, setup

setup(
    cffi_modules=["csrc/build_npu.py:ffibuilder", "csrc/build_nn_cpu.py:ffibuilder"],
    ext_modules=[
        Extension(
            "framework.binder._wirec",
            ["framework/binder/_wirec.c"],
            extra_compile_args=["-std=gnu11", "-O2", "-Wall", "-Wextra", "-Werror"],
        )
    ],
)
