"""Mixed precision as it really runs: pick the mode for the hardware, trace the dtypes, read the loss scaler.

Introduced in notebook 02 (mixed precision); notebooks 03 and 05 call `pick_mixed_precision` to set
`Accelerator(mixed_precision=...)`. Nothing here imports torch at import time.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .checks import check_choice
from .hardware import HardwareInfo, recommend

# `Precision`, `MeasuredMode` and `OpRecord` are what the helpers return; notebooks read their fields.
__all__ = ["MODES", "pick_mixed_precision", "measured_mode", "precision_in_effect", "scaler_settings", "DtypeTrace"]

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
    a TPU is refused by Accelerate itself, so it becomes `bf16`. bf16 on a GPU without bf16 tensor cores (T4,
    P100) runs, emulated and slow; it is kept, with a warning.
    """
    check_choice("mixed_precision", requested, MODES)
    rec = recommend(hw)
    if requested == "auto":
        return Precision(rec.mixed_precision, rec.reasons["mixed_precision"], None)
    kind = hw.device_kind
    if requested == "fp16" and kind == "cpu":
        return Precision("no", rec.reasons["mixed_precision"],
                         "mixed_precision='fp16' does nothing on a CPU (no autocast, no GradScaler, yet "
                         "accelerator.mixed_precision says 'fp16'); using 'no'. Try 'bf16' to see CPU autocast.")
    if requested == "fp16" and kind == "tpu":
        return Precision("bf16", rec.reasons["mixed_precision"],
                         "Accelerate refuses fp16 on XLA devices; TPUs compute in bf16, so using 'bf16'.")
    if requested == "bf16" and kind == "cuda" and not all(g.bf16_tensor_cores for g in hw.gpus):
        names = ", ".join(sorted({g.name for g in hw.gpus}))
        return Precision("bf16", f"bf16 was asked for on {names}",
                         f"{names} has no bf16 tensor cores: bf16 runs emulated, often slower than fp32; "
                         "use 'fp16' here.")
    return Precision(requested, f"mixed_precision={requested!r} was asked for", None)


class MeasuredMode(NamedTuple):
    """The mode to measure against fp32, whether to run on the CPU instead of the accelerator, and why."""

    mode: str
    cpu: bool
    reason: str


def measured_mode(hw: HardwareInfo) -> MeasuredMode:
    """The mixed-precision mode worth measuring against fp32 on this hardware, and why (notebook 02).

    Unlike `pick_mixed_precision`, never `no`: on a CPU it is `bf16`, the only mode that does anything there.
    On a TPU the measurement runs on the host CPU (`cpu=True`): XLA compiles and casts in its own way
    (notebook 04), and autocast's dtype trace and `GradScaler` are what this notebook shows.
    """
    if hw.device_kind == "cuda":
        if all(g.bf16_tensor_cores for g in hw.gpus):
            return MeasuredMode("bf16", False, "bf16 tensor cores (compute capability >= 8.0): as fast as fp16, "
                                               "no loss scaling")
        return MeasuredMode("fp16", False, "fp16 tensor cores only (T4, V100: compute capability 7.x); bf16 "
                                           "would be emulated")
    if hw.device_kind == "tpu":
        return MeasuredMode("bf16", True, "TPU: this notebook runs on the host CPU, in bf16; XLA's own bf16 "
                                          "is notebook 04's subject")
    return MeasuredMode("bf16", False, "CPU: fp16 would do nothing here (no autocast), bf16 autocast is real")


def scaler_settings(scaler) -> dict[str, Any]:
    """A `GradScaler`'s class and settings, read through its public getters (notebook 02)."""
    cls = type(scaler)
    return {"class": f"{cls.__module__}.{cls.__qualname__}", "enabled": scaler.is_enabled(),
            "scale": scaler.get_scale(), "growth_factor": scaler.get_growth_factor(),
            "backoff_factor": scaler.get_backoff_factor(), "growth_interval": scaler.get_growth_interval()}


def precision_in_effect(accelerator) -> dict[str, Any]:
    """What an `Accelerator` really does, beside what it reports: `mixed_precision` is only the request.

    `native_amp` says whether `prepare` wraps the forward in `torch.autocast`; `scaler` is the `GradScaler`
    (fp16 only). `noop` is true when a mode was asked for and nothing runs, as with fp16 on a CPU.
    """
    scaler = accelerator.scaler
    runs = accelerator.mixed_precision if accelerator.native_amp else "no"
    return {"reports": accelerator.mixed_precision, "runs": runs, "native_amp": accelerator.native_amp,
            "scaler": None if scaler is None else scaler_settings(scaler),
            "noop": accelerator.mixed_precision != "no" and runs == "no"}


class OpRecord(NamedTuple):
    """One aten op that ran: its name and the dtypes of its tensor inputs and outputs."""

    op: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


# Ops that only move, view or copy data: they take the dtype of their input and hide what computes.
_LAYOUT_OPS = frozenset({"clone", "_unsafe_view", "expand", "ones_like", "zeros_like", "empty_like", "copy_",
                         "detach", "view", "t", "transpose", "permute", "select", "unsqueeze", "squeeze",
                         "slice", "split", "chunk", "unbind", "as_strided", "alias", "reshape", "contiguous"})


def _dtype_name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _make_mode(records: list[OpRecord]):
    import torch

    # TorchDispatchMode lives in a private module, but it is the documented way to see every aten op
    # (torch's own FlopCounterMode and DebugMode are built on it); tests/test_02 pins what it reports.
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    def dtypes(tree) -> tuple[str, ...]:
        return tuple(_dtype_name(t.dtype) for t in tree_leaves(tree) if isinstance(t, torch.Tensor))

    class Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            records.append(OpRecord(func.overloadpacket.__name__, dtypes((args, kwargs)), dtypes(out)))
            return out

    return Recorder()


class DtypeTrace:
    """Record every aten op that runs inside the `with` block, with its input and output dtypes (notebook 02).

    It sits below autocast in PyTorch's dispatcher, so it sees what autocast really ran: the casts it inserted
    (`_to_copy`) and the dtype each kernel computed in. Works for forward and backward, on any device.

        with DtypeTrace() as forward:
            loss = model(inputs).float().mean()
        forward.op_dtypes()  # {'addmm': 'bfloat16', 'native_layer_norm': 'bfloat16', ...}
    """

    def __init__(self):
        self.records: list[OpRecord] = []
        self._mode = None

    def __enter__(self) -> DtypeTrace:
        self._mode = _make_mode(self.records)
        self._mode.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._mode.__exit__(*exc)

    def _compute(self):
        """(name, record) of every op that computes; casts are named `_to_copy(float32->bfloat16)`."""
        for rec in self.records:
            if rec.op in _LAYOUT_OPS or not rec.outputs:
                continue
            name = f"_to_copy({rec.inputs[0]}->{rec.outputs[0]})" if rec.op == "_to_copy" else rec.op
            yield name, rec

    def op_dtypes(self) -> dict[str, str]:
        """Compute op -> the dtype(s) of its first output, in the order the ops first ran."""
        found: dict[str, set[str]] = {}
        for name, rec in self._compute():
            found.setdefault(name, set()).add(rec.outputs[0])
        return {name: "/".join(sorted(kinds)) for name, kinds in found.items()}

    def signatures(self) -> dict[str, str]:
        """Compute op -> `(input dtypes) -> output dtype`, each distinct signature once, in order of first use."""
        found: dict[str, list[str]] = {}
        for name, rec in self._compute():
            signature = f"({', '.join(rec.inputs)}) -> {rec.outputs[0]}"
            if signature not in found.setdefault(name, []):
                found[name].append(signature)
        return {name: "; ".join(signatures) for name, signatures in found.items()}

    def count(self, op: str) -> int:
        """How many times `op` (or a cast name from `op_dtypes`) ran."""
        return sum(1 for rec in self.records if rec.op == op
                   or (rec.op == "_to_copy" and op == f"_to_copy({rec.inputs[0]}->{rec.outputs[0]})"))
