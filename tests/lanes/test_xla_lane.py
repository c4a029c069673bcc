"""The XLA lane: notebook 04's TPU half executed for real on XLA's CPU backend (`make test-xla`).

It needs torch_xla, which pairs with torch 2.9.0 only and lives in its own environment (.venv-xla). In the main
environment these tests are skipped; in the XLA lane (FREEGPU_XLA_LANE=1) a missing torch_xla is a failure.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest
from test_notebooks import check_04_loader_half

IN_LANE = os.environ.get("FREEGPU_XLA_LANE") == "1"
HAVE_XLA = importlib.util.find_spec("torch_xla") is not None

pytestmark = pytest.mark.skipif(not (IN_LANE or HAVE_XLA),
                                reason="torch_xla is not installed here; `make test-xla` runs these tests")


def test_lane_has_torch_xla():
    assert HAVE_XLA, "the XLA lane must have torch_xla installed"
    assert os.environ.get("PJRT_DEVICE") == "CPU"


def test_04_on_xla(executed, course_out):
    record, results = executed("04_tpu_data_loaders")
    check_04_loader_half(results, course_out / "results" / "04_tpu_data_loaders")
    assert results["xla_ran"] is True and results["device"] == "xla"
    assert (results["xla_version"], results["pjrt_device"]) == ("2.9.0", "CPU")  # the lane's pair; 04 set CPU
    assert results["xla_device"].startswith("xla")
    assert results["lazy_compiles_before_sync"] == 0  # recorded, not run, until torch_xla.sync()
    varying, fixed = results["compiles_varying_per_step"], results["compiles_fixed_per_step"]
    assert varying[-1] >= 3 and fixed[-1] <= 2 and fixed[-1] < varying[-1]
    assert fixed[1:] == [fixed[1]] * len(fixed[1:])  # no new compile after the second step
    sgd = results["compiles_sgd_per_step"]  # SGD keeps no state: the second step compiles nothing new
    assert sgd == [sgd[0]] * len(sgd) and sgd[0] >= 1 and (fixed[-1] == 1 or sgd[-1] < fixed[-1])
    assert results["item_transfers"] >= 5
    assert results["accelerate_distributed_type"] == "XLA"
    # Step 3's loop, counted after it: compiles, and programs reused for graphs seen before.
    assert results["loop_compiles"] >= 1 and results["loop_cached_compiles"] >= 1
    # Step 5 feeds Accelerate whole batches only (step 4's lesson): a few compiles, not one per step.
    assert results["accelerate_compiles"] <= 4 < results["accelerate_steps"]
    assert results["prepared_dataloader_type"] == "MpDeviceLoaderWrapper"


def test_04_full_profile_on_xla(executed_full):
    """The learner's path on a TPU runtime: the full profile (MNIST in the Hub's layout) through XLA's steps."""
    _, results, _ = executed_full("04_tpu_data_loaders")
    assert results["profile"] == "full" and results["xla_ran"] is True and results["device"] == "xla"
    assert results["loop_compiles"] >= 1 and results["loop_cached_compiles"] >= 1
    assert results["accelerate_distributed_type"] == "XLA"
    assert results["accelerate_compiles"] <= 4 < results["accelerate_steps"]


def test_04_old_xla_names_are_deprecated():
    """Step 3 says xm.xla_device() and xm.mark_step() are deprecated: both warn, naming the new calls."""
    import warnings

    import torch_xla.core.xla_model as xm

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        xm.xla_device(), xm.mark_step()
    said = " ".join(str(w.message) for w in caught if issubclass(w.category, DeprecationWarning))
    assert "torch_xla.device" in said and "torch_xla.sync" in said


def test_04_import_accelerate_sets_pjrt_device_tpu_on_a_tpu_vm():
    """Step 1 and step 5: `import accelerate` imports torch_xla, whose import picks PJRT_DEVICE=TPU when it is unset
    and libtpu and a TPU chip are there (read from the installed sources; this machine has no TPU)."""
    import inspect

    import accelerate.utils.imports as imports
    import torch_xla
    import torch_xla.runtime as runtime

    assert "import torch_xla.core.xla_model" in inspect.getsource(imports)
    assert "runtime._maybe_select_default_device()" in inspect.getsource(torch_xla)
    select = inspect.getsource(runtime._maybe_select_default_device)
    assert "PJRT_DEVICE in os.environ" in select  # a value set before the import wins (step 1's setdefault)
    assert "num_available_chips() > 0" in select and "= 'TPU'" in select


def _fresh(code: str, **env: str) -> str:
    """Run `code` in a fresh Python on XLA's CPU backend; its stdout."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PJRT_DEVICE": "CPU", **env})
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_04_launching_on_a_tpu_needs_a_fresh_kernel():
    """Exercise 4: with an Accelerator in the kernel, notebook_launcher's TPU branch refuses; once the XLA device was
    touched, xmp.spawn (which that branch calls) fails. Both driven for real on XLA's CPU backend."""
    launcher = _fresh("import os\nfrom accelerate import Accelerator, notebook_launcher\nAccelerator()\n"
                      "os.environ['PJRT_DEVICE'] = 'TPU'  # the TPU branch, on Kaggle\n"
                      "try:\n    notebook_launcher(print, num_processes=8)\n"
                      "except ValueError as error:\n    print('refused:', error)\n",
                      KAGGLE_KERNEL_RUN_TYPE="Interactive")
    assert "refused: To train on TPU in Colab or Kaggle Kernel, the `Accelerator` should only be" in launcher
    spawn = _fresh("import torch, torch_xla, torch_xla.distributed.xla_multiprocessing as xmp\n"
                   "torch.ones(1, device=torch_xla.device()).sum().item()  # the XLA device touched\n"
                   "try:\n    xmp.spawn(print, start_method='fork')\n"
                   "except RuntimeError as error:\n    print('refused:', error)\n")
    assert "refused: Runtime is already initialized" in spawn
