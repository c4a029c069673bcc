"""The XLA lane for notebook 02 (issue 26): its TPU branch, executed where torch_xla imports (`make test-xla`).

On a TPU VM torch_xla is installed, and Accelerate then picks XLA whatever `cpu` says. Notebook 02 sets
`USE_TORCH_XLA=0` before Accelerate is imported, so every step runs on the host CPU. Here, with torch_xla importable
and `PJRT_DEVICE=CPU`, the notebook runs as it would on a TPU, and each step must report the CPU. The facts behind
that choice are driven for real in fresh processes: `cpu=True` gives `xla:0`, `USE_TORCH_XLA=0` gives the CPU, and
Accelerate told it is on a TPU refuses fp16 (step 4 without the flag would raise there).
Skipped where torch_xla is not installed; in the lane (`FREEGPU_XLA_LANE=1`) a missing torch_xla is a failure.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest
from conftest import NOTEBOOK_DIR

IN_LANE = os.environ.get("FREEGPU_XLA_LANE") == "1"
HAVE_XLA = importlib.util.find_spec("torch_xla") is not None

pytestmark = pytest.mark.skipif(not (IN_LANE or HAVE_XLA),
                                reason="torch_xla is not installed here; `make test-xla` runs these tests")


def _fresh(code: str, **env: str) -> dict:
    """Run `code` in a fresh Python (Accelerate keeps one state per process); it prints one JSON line last."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PJRT_DEVICE": "CPU", **env})
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_lane_has_torch_xla():
    assert HAVE_XLA, "the XLA lane must have torch_xla installed"


def test_cpu_true_is_xla_when_torch_xla_imports():
    """What 02 said before issue 26 ('on a TPU, cpu=True runs on the host CPU') is false: it is XLA. 04's step 5 and
    exercise 4 say the same: with torch_xla importable, every Accelerator is XLA, cpu=True or not (no gloo)."""
    got = _fresh("import json; from accelerate import Accelerator; a = Accelerator(cpu=True); "
                 "print(json.dumps([a.device.type, a.distributed_type.value]))")
    assert got == ["xla", "XLA"]


def test_use_torch_xla_0_keeps_accelerate_on_the_cpu():
    """02's step 1 flag: step 4's `Accelerator(mixed_precision='fp16', cpu=True)` is the CPU no-op again."""
    got = _fresh("import json, sys; from accelerate import Accelerator; "
                 "a = Accelerator(mixed_precision='fp16', cpu=True); "
                 "print(json.dumps([a.device.type, a.distributed_type.value, a.native_amp, "
                 "'torch_xla' in sys.modules]))",
                 USE_TORCH_XLA="0")
    assert got == ["cpu", "NO", False, False]


def test_fp16_is_refused_when_accelerate_is_told_it_is_on_a_tpu():
    """The TPU check patched (XLA's CPU backend is no TPU): fp16 raises, as step 4 without the flag would on a TPU.
    Unpatched, XLA:CPU accepts fp16: the refusal is the TPU's alone."""
    code = ("import json; import accelerate.accelerator as m; from accelerate import Accelerator; "
            "from accelerate.state import AcceleratorState; "
            "plain = Accelerator(mixed_precision='fp16').native_amp; AcceleratorState._reset_state(True); "
            "m.is_torch_xla_available = lambda check_is_tpu=False, check_is_gpu=False: True\n"
            "try:\n    Accelerator(mixed_precision='fp16'); said = None\n"
            "except ValueError as error:\n    said = str(error)\n"
            "print(json.dumps([plain, said]))")
    plain, said = _fresh(code)
    assert plain is True and said == "fp16 mixed precision is not supported on 'xla'."


def test_02_runs_on_the_host_cpu_where_torch_xla_imports(tmp_path, monkeypatch):
    monkeypatch.setenv("TPU_ACCELERATOR_TYPE", "v5litepod-8")  # freegpu detects a TPU session (PJRT stays CPU)
    from build import run_course as runner

    record = runner.execute(NOTEBOOK_DIR / "02_mixed_precision.ipynb", tmp_path, {"profile": "smoke"})
    assert record.status == "ok", record.error  # the notebook and its solutions
    r = json.loads((tmp_path / record.results).read_text())
    # Each step's device: step 2's Accelerator, step 3's scaler walk and step 5's counts ran on the CPU.
    assert r["device"] == "tpu" and r["measured_on_host_cpu"] is True  # the session is a TPU one
    assert r["measured_on"] == "cpu" and r["measured_mode"] == "bf16"
    assert r["accelerator_effect"] == {"mixed_precision": "bf16", "native_amp": True}
    assert r["accelerate_is_native_amp"] is True and r["param_dtype_during_autocast"] == ["torch.float32"]
    assert r["cpu_fp16_effect"] == {"mixed_precision": "fp16", "native_amp": False} and r["cpu_fp16_is_noop"] is True
    assert r["fp16_underflow_without_scaling"] is True and r["fp16_survives_with_scaling"] is True


def test_01_tpu_branch_runs_on_the_host_cpu(tmp_path, monkeypatch):
    """Notebook 01 as a Kaggle TPU session takes it (launcher branch 'tpu', torch_xla importable): step 3 trains on
    the host CPU (USE_TORCH_XLA=0, so the proof is exact), step 4 leaves the launch to notebook 04, and step 5's
    torchrun processes join with gloo on the CPU, not XLA."""
    monkeypatch.setenv("KAGGLE_KERNEL_RUN_TYPE", "Interactive")
    monkeypatch.setenv("TPU_NAME", "local")  # with Kaggle: notebook_launcher's TPU branch (PJRT_DEVICE stays CPU)
    from build import run_course as runner

    record = runner.execute(NOTEBOOK_DIR / "01_mnist_migration.ipynb", tmp_path, {"profile": "smoke"})
    assert record.status == "ok", record.error  # the notebook and its solutions
    r = json.loads((tmp_path / record.results).read_text())
    assert r["launcher_branch"] == "tpu" and r["launcher_ran_in_kernel"] == []
    assert r["max_abs_loss_diff"] == 0 and r["max_abs_weight_diff"] == 0  # both loops on the CPU
    assert r["ddp_launched_by"].startswith("torchrun") and r["ddp_distributed_type"] == "MULTI_CPU"
    assert r["ddp_num_processes"] == r["script_launch_world_size"] == 2
