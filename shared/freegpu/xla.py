"""torch_xla without a TPU: can it be used here? Introduced in notebook 04.

torch_xla runs real XLA on the CPU with `PJRT_DEVICE=CPU`, which is how the course tests its TPU notebook.
Nothing here imports torch_xla unless it is installed.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os

__all__ = ["is_installed", "xla_status"]


def is_installed() -> bool:
    """Whether torch_xla is installed, found without importing it (importing it would start its runtime)."""
    return importlib.util.find_spec("torch_xla") is not None


def xla_status() -> tuple[bool, str | None, str | None]:
    """Whether torch_xla can be used here, its version and `PJRT_DEVICE`; it reads them and changes nothing.

    Usable needs both: torch_xla installed (it pairs with one torch release, 2.9.0 with 2.9.0: a TPU runtime on
    Colab/Kaggle has it, here `make test-xla` builds it) and `PJRT_DEVICE` set (TPU, CPU or CUDA).

    Notebooks 04 and 05 set `PJRT_DEVICE` themselves, in plain sight, before anything imports torch_xla: `TPU`
    on a TPU (`notebook_launcher` needs it to detect one), `CPU` for XLA's CPU backend. 04 reads its compile and
    transfer counts in the notebook with `torch_xla.debug.metrics.metric_data`.
    """
    version = importlib.metadata.version("torch_xla") if is_installed() else None
    device = os.environ.get("PJRT_DEVICE") or None
    return bool(version and device), version, device
