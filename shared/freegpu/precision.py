"""Pick the mixed-precision mode for the hardware: what to pass to `Accelerator(mixed_precision=...)`, and why.

Introduced in notebook 02 (mixed precision); notebooks 02 and 05 call `pick_mixed_precision`, and the parameter
checks of both use `MODES`. Nothing here imports torch.
"""

from __future__ import annotations

from typing import NamedTuple

from .checks import check_choice
from .hardware import HardwareInfo, recommend
from .i18n import tr

# `Precision` is what `pick_mixed_precision` returns; notebooks read its fields.
__all__ = ["MODES", "pick_mixed_precision"]

MODES = ("auto", "no", "fp16", "bf16")


class Precision(NamedTuple):
    """What to pass to `Accelerator(mixed_precision=...)`, why, and a warning when the request was changed."""

    mode: str
    reason: str
    warning: str | None


def pick_mixed_precision(hw: HardwareInfo, requested: str = "auto") -> Precision:
    """`requested` if this hardware gains from it, else the mode that works here, with the reason.

    `auto` follows `freegpu.hardware.recommend`. An explicit `fp16` on a CPU is turned into `no` with a warning:
    Accelerate would accept it, report "fp16", and run everything in fp32 (no autocast, no GradScaler). `fp16` on
    a TPU is refused by Accelerate itself (only on a TPU: XLA's CPU and GPU backends accept it), so it becomes
    `no`, as `recommend` says for a TPU (Accelerate's bf16 there stores the weights in bf16). bf16 on a GPU
    without bf16 tensor cores (T4, P100) runs its matmuls without tensor cores; it is kept, with a warning.
    """
    check_choice("mixed_precision", requested, MODES)
    rec = recommend(hw)
    if requested == "auto":
        return Precision(rec.mixed_precision, rec.reasons["mixed_precision"], None)
    kind = hw.device_kind
    if requested == "fp16" and kind == "cpu":
        return Precision("no", rec.reasons["mixed_precision"],
                         tr("mixed_precision='fp16' does nothing on a CPU (no autocast, no GradScaler, yet "
                            "accelerator.mixed_precision says 'fp16'); using 'no'. Try 'bf16' to see CPU autocast."))
    if requested == "fp16" and kind == "tpu":
        return Precision("no", rec.reasons["mixed_precision"],
                         tr("Accelerate refuses fp16 on a TPU; using 'no' (fp32 weights), since its bf16 there "
                            "stores the weights in bf16."))
    if requested == "bf16" and kind == "cuda" and not all(g.bf16_tensor_cores for g in hw.gpus):
        names = ", ".join(sorted({g.name for g in hw.gpus}))
        return Precision("bf16", tr("bf16 was asked for on {names}").format(names=names),
                         tr("{names} has no bf16 tensor cores: bf16 matmuls run without them, fp16 ones use "
                            "them; use 'fp16' here.").format(names=names))
    return Precision(requested, tr("mixed_precision={requested!r} was asked for").format(requested=requested), None)
