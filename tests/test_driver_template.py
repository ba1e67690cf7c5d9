"""A driver .so built from csrc/drivers/template, loaded by path, doing real work."""

import pathlib
import shutil
import subprocess

import numpy as np
import pytest

import npuhal
from npuhal import EndReason, FuseCode, ModelBuilder, OperationType, SchedulingConfig

ROOT = pathlib.Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "csrc" / "drivers" / "template"


def _has_driver_target() -> bool:
    makefile = (ROOT / "Makefile").read_text()
    return any(line.startswith("driver:") for line in makefile.splitlines())


@pytest.fixture(scope="module")
def template_so(tmp_path_factory):
    sources = sorted(TEMPLATE.glob("*.c"))
    if not sources:
        pytest.skip("csrc/drivers/template has no C source yet")
    if not _has_driver_target():
        pytest.skip("the Makefile has no `driver` target yet (make driver SRC=... OUT=...)")
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    out = tmp_path_factory.mktemp("drivers") / "template.so"
    proc = subprocess.run(
        ["make", "-s", "driver", f"SRC={sources[0]}", f"OUT={out}"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert out.exists()
    return out


def add_model():
    m = ModelBuilder()
    a, b = m.input((4, 8)), m.input((4, 8))
    m.output(m.operation(OperationType.ADD, [a, b, m.int32(FuseCode.RELU)], (4, 8)))
    return m.build()


async def test_the_template_driver_loads_by_path_and_computes(template_so):
    async with npuhal.open_driver(template_so) as driver:
        devices = driver.devices
        assert len(devices) >= 1
        dev = devices[0]
        assert dev.name.count("-") == 1 and dev.name.split("-")[0] == driver.vendor
        assert dev.version and dev.feature_level == 29
        rng = np.random.default_rng(5)
        x, y = rng.standard_normal((2, 4, 8), dtype=np.float32)
        handle = driver.load_model(dev, add_model())
        work = driver.submit(handle, [x, y], uid=10001, job_priority=100)
        driver.run_until_idle()
        assert driver.work_ended(work).reason is EndReason.COMPLETED
        np.testing.assert_allclose(driver.outputs(work)[0], np.maximum(x + y, 0), rtol=1e-6)


def test_a_bare_file_name_means_the_current_directory(template_so, monkeypatch):
    monkeypatch.chdir(template_so.parent)
    with npuhal.Driver.open(template_so.name) as driver:
        assert driver.devices


async def test_the_template_driver_keeps_the_scheduling_rules(template_so):
    async with npuhal.open_driver(template_so) as driver:
        with pytest.raises(npuhal.NpuInvalidPriorityError):
            driver.set_scheduling_configs([SchedulingConfig(uid=1001, appPriority=-1, hasDirectAccess=True)])
        with pytest.raises(npuhal.NpuDuplicateUidError):
            driver.set_scheduling_configs([SchedulingConfig(uid=1, hasDirectAccess=True), SchedulingConfig(uid=1, hasDirectAccess=True)])
        driver.set_scheduling_configs([SchedulingConfig(uid=1001, hasDirectAccess=False)])
        handle = driver.load_model(0, add_model())
        z = np.zeros((4, 8), np.float32)
        with pytest.raises(npuhal.NpuDirectAccessError):
            driver.submit(handle, [z, z], uid=1001, job_priority=0)
        with pytest.raises(npuhal.NpuAttributionError):
            driver.submit(handle, [z, z], uid=1002, original_uid=42, job_priority=0)


def test_a_driver_built_against_another_abi_is_refused(tmp_path, template_so):
    # The same template, its ops table claiming a future ABI version.
    src = sorted(TEMPLATE.glob("*.c"))[0].read_text()
    marker = ".abi_version = NPU_ABI_VERSION"
    if marker not in src:
        pytest.skip(f"the template no longer sets {marker!r}; update this test")
    fake = tmp_path / "future.c"
    fake.write_text(src.replace(marker, marker + " + 41"))
    out = tmp_path / "future.so"
    proc = subprocess.run(
        ["make", "-s", "driver", f"SRC={fake}", f"OUT={out}"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    with pytest.raises(npuhal.NpuAbiError) as info:
        npuhal.Driver.open(out)
    assert info.value.name == "DRIVER_ABI_MISMATCH"
    assert isinstance(info.value, ImportError)
