"""torch_xla without a TPU: can it be used here? Introduced in notebook 04.

torch_xla runs real XLA on the CPU with `PJRT_DEVICE=CPU`, which is how the course tests its TPU notebook.
Nothing here imports torch_xla unless it is installed.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os

from .i18n import tr

__all__ = ["is_installed", "xla_status"]


def is_installed() -> bool:
    """Whether torch_xla is installed, found without importing it (importing it would start its runtime)."""
    return importlib.util.find_spec("torch_xla") is not None


def xla_status() -> tuple[bool, str]:
    """Whether torch_xla can be used here, and why (not); it reads `PJRT_DEVICE` and changes nothing.

    Notebook 04 sets `PJRT_DEVICE` itself, in plain sight, before anything imports torch_xla: `TPU` on a TPU
    (`notebook_launcher` needs it to detect one), `CPU` for XLA's CPU backend. Its compile and transfer counts
    are read in the notebook with `torch_xla.debug.metrics.metric_data`.
    """
    if not is_installed():
        return False, tr("torch_xla is not installed in this environment. It pairs with one torch release "
                         "(torch_xla 2.9.0 with torch 2.9.0): use a TPU runtime on Colab/Kaggle, or `make "
                         "test-xla`.")
    version = importlib.metadata.version("torch_xla")
    device = os.environ.get("PJRT_DEVICE")
    if not device:
        return False, tr("torch_xla {version} is installed, but PJRT_DEVICE is not set (TPU, CPU or CUDA)").format(
            version=version)
    return True, tr("torch_xla {version} with PJRT_DEVICE={device}").format(version=version, device=device)
