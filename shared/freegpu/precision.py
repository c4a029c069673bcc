"""Pick the mixed-precision mode for the hardware: what to pass to `Accelerator(mixed_precision=...)`.

Introduced in notebook 02 (mixed precision); notebooks 02 and 05 call `pick_mixed_precision`, and the parameter
checks of both use `MODES`. Nothing here imports torch.
"""

from __future__ import annotations

from typing import NamedTuple

from .checks import check_choice
from .hardware import HardwareInfo, recommend

# `Precision` is what `pick_mixed_precision` returns; notebooks read its fields.
__all__ = ["MODES", "pick_mixed_precision"]

MODES = ("auto", "no", "fp16", "bf16")


class Precision(NamedTuple):
    """What to pass to `Accelerator(mixed_precision=...)`, and a warning (a name, see below) when the request was
    changed or is a poor fit."""

    mode: str
    warning: str | None


def pick_mixed_precision(hw: HardwareInfo, requested: str = "auto") -> Precision:
    """`requested` if this hardware gains from it, else the mode that works here.

    `auto` follows `freegpu.hardware.recommend`. The warnings:

    - `"fp16_does_nothing_on_a_cpu"`: Accelerate would accept fp16 on a CPU, report "fp16", and run everything in
      fp32 (no autocast, no GradScaler); the mode becomes `no`. Try `bf16` to see CPU autocast.
    - `"fp16_refused_on_a_tpu"`: Accelerate itself refuses fp16 on a TPU (only on a TPU: XLA's CPU and GPU backends
      accept it); the mode becomes `no`, as `recommend` says for a TPU (its bf16 there stores the weights in bf16).
    - `"bf16_without_tensor_cores"`: a GPU without bf16 tensor cores (T4, P100) runs bf16 matmuls without them,
      fp16 ones with them; bf16 is kept. Use fp16 there.
    """
    check_choice("mixed_precision", requested, MODES)
    kind = hw.device_kind
    if requested == "auto":
        return Precision(recommend(hw).mixed_precision, None)
    if requested == "fp16" and kind in ("cpu", "tpu"):
        return Precision("no", "fp16_does_nothing_on_a_cpu" if kind == "cpu" else "fp16_refused_on_a_tpu")
    if requested == "bf16" and kind == "cuda" and not all(g.bf16_tensor_cores for g in hw.gpus):
        return Precision("bf16", "bf16_without_tensor_cores")
    return Precision(requested, None)
