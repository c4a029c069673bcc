"""torch_xla without a TPU: is it here, and what did the XLA compiler do? Introduced in notebook 04.

torch_xla runs real XLA on the CPU with `PJRT_DEVICE=CPU`, which is how the course tests its TPU notebook.
Nothing here imports torch_xla unless it is installed.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os

__all__ = ["xla_status", "compile_count", "transfer_count"]


def xla_status(tpu_present: bool) -> tuple[bool, str]:
    """Whether torch_xla can be used here, and why (not). Sets `PJRT_DEVICE` when unset: TPU if one is present.

    Call it before anything touches the XLA device; `notebook_launcher` needs `PJRT_DEVICE=TPU` to detect TPUs.
    """
    if importlib.util.find_spec("torch_xla") is None:
        return False, ("torch_xla is not installed in this environment. It pairs with one torch release "
                       "(torch_xla 2.9.0 with torch 2.9.0): use a TPU runtime on Colab/Kaggle, or `make test-xla`.")
    os.environ.setdefault("PJRT_DEVICE", "TPU" if tpu_present else "CPU")
    version = importlib.metadata.version("torch_xla")
    return True, f"torch_xla {version} with PJRT_DEVICE={os.environ['PJRT_DEVICE']}"


def _metric_count(name: str) -> int:
    import torch_xla.debug.metrics as met

    data = met.metric_data(name)
    return int(data[0]) if data else 0


def compile_count() -> int:
    """How many XLA graphs this process has compiled so far (the `CompileTime` metric)."""
    return _metric_count("CompileTime")


def transfer_count() -> int:
    """How many device-to-host transfers this process has made (`.item()`, printing, `.cpu()`...)."""
    return _metric_count("TransferFromDeviceTime")
