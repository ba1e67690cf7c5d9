# setuptools reads everything from pyproject.toml except cffi_modules, which its
# pyproject schema does not accept; cffi's own docs put it here.
from setuptools import setup

setup(cffi_modules=["csrc/build_npu.py:ffibuilder", "csrc/build_nn_cpu.py:ffibuilder"])
