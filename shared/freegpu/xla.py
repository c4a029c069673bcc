"""torch_xla without a TPU: can it be used here? Introduced in notebook 04.

torch_xla runs real XLA on the CPU with `PJRT_DEVICE=CPU`, which is how the course tests its TPU notebook.
Nothing here imports torch_xla unless it is installed.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os

from .i18n import tr

__all__ = ["is_installed", "xla_status", "metric_count", "compiles_per_step"]


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


def metric_count(name: str) -> int:
    """How often this process did `name` so far, e.g. "CompileTime" or "TransferFromDeviceTime" (notebook 04).

    `torch_xla.debug.metrics.metric_data(name)` is `(count, total, samples)`, or None before the first one.
    """
    import torch_xla.debug.metrics as met

    data = met.metric_data(name)
    return data[0] if data else 0


def compiles_per_step(make_model, batches, device, optimizer_class=None, lr: float = 3e-3) -> list[int]:
    """Train `make_model()` with `optimizer_class` (AdamW if None) on `batches` (inputs, targets; targets -100 are
    ignored), one `torch_xla.sync()` per step; return this process's compile count after each step, counted from
    the start (notebook 04's step 4: a new batch shape is a new compile; AdamW's state, created in the first step,
    changes the second step's graph once, SGD keeps none)."""
    import torch
    import torch.nn.functional as F
    import torch_xla

    model = make_model()
    optimizer = (optimizer_class or torch.optim.AdamW)(model.parameters(), lr=lr)
    counts, start = [], metric_count("CompileTime")
    for inputs, targets in batches:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(inputs.to(device)), targets.to(device), ignore_index=-100)
        loss.backward()
        optimizer.step()
        torch_xla.sync()
        counts.append(metric_count("CompileTime") - start)
    return counts
