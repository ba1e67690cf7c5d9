"""``npuemu nn plan``: offline against the reference driver, and its errors (CliRunner)."""

from __future__ import annotations

import re

from click.testing import CliRunner

from framework.cli import main


def invoke(*args, env=None):
    return CliRunner().invoke(main, ["nn", "plan", *args], env=env or {})


def step_rows(output):
    """(step, device, operations) of the step table."""
    rows = []
    for line in output.splitlines():
        m = re.match(r"^(\d+)\s+(\S+)\s+(ACCELERATOR|GPU|CPU|OTHER)\s+(.*?)\s{2,}", line)
        if m:
            rows.append((int(m.group(1)), m.group(2), m.group(4)))
    return rows


def test_offline_plan_puts_the_sample_model_on_the_fastest_device():
    result = invoke("--offline")
    assert result.exit_code == 0, result.output
    assert "emu-npu" in result.output and "nnapi-reference" in result.output
    assert "CPU fallback allowed" in result.output
    rows = step_rows(result.output)
    # the float32 sample goes whole to the fastest float32 device (the NPU leads on quant8, float16)
    assert [(s, d) for s, d, _ in rows] == [(0, "emu-gpu")]
    assert rows[0][2].count("#") == 9  # every operation of the sample model


def test_offline_plan_for_two_devices_under_low_power_splits_the_model():
    result = invoke("--offline", "--devices", "emu-npu,emu-dsp", "--preference", "low-power")
    assert result.exit_code == 0, result.output
    assert "never (createForDevices)" in result.output
    rows = step_rows(result.output)
    assert {d for _, d, _ in rows} == {"emu-npu", "emu-dsp"}
    dsp_ops = " ".join(ops for _, d, ops in rows if d == "emu-dsp")
    npu_ops = " ".join(ops for _, d, ops in rows if d == "emu-npu")
    assert "CONV_2D" in npu_ops and "SOFTMAX" in npu_ops and "CONV_2D" not in dsp_ops
    assert "FULLY_CONNECTED" in dsp_ops


def test_offline_enabled_devices_filter_from_option_and_environment():
    result = invoke("--offline", "--enabled-devices", "emu-gpu")
    assert result.exit_code == 0, result.output
    assert [d for _, d, _ in step_rows(result.output)] == ["emu-gpu"]
    assert "emu-npu" not in result.output
    result = invoke("--offline", env={"NPUEMU_NN_ENABLED_DEVICES": "emu-dsp"})
    assert result.exit_code == 0, result.output
    # The DSP cannot run CONV_2D, SUB or SOFTMAX: those go to the CPU.
    assert {d for _, d, _ in step_rows(result.output)} == {"emu-dsp", "nnapi-reference"}


def test_unknown_device_and_impossible_plans_are_one_line_errors():
    result = invoke("--offline", "--devices", "qti-dsp")
    assert result.exit_code == 2
    assert "no device named qti-dsp" in result.output
    result = invoke("--offline", "--devices", "emu-dsp")
    assert result.exit_code != 0
    assert "supported by none" in result.output
    assert "Traceback" not in result.output
    result = invoke("--offline", "--devices", "emu-npu,emu-npu")
    assert result.exit_code == 2 and "twice" in result.output


def test_online_without_an_emulator_says_so(tmp_path):
    result = invoke("--runtime-dir", str(tmp_path / "nothing-here"))
    assert result.exit_code == 3
    assert "no emulator" in result.output
