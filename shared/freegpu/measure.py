"""Measure what the notebooks claim: repeated timings with their spread, and bytes saved for backward.

`interleaved_timings`, `spread` and `compare`: repeated timings and the one "resolved" rule (notebooks 03 and 04).
`SavedTensors`: notebook 02 (what autocast saves), reused by 03 (checkpointing).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

__all__ = ["interleaved_timings", "spread", "compare", "SavedTensors"]


def interleaved_timings(candidates: dict[str, Callable[[], object]], repeats: int = 5, warmup: int = 1,
                        clock: Callable[[], float] = time.perf_counter) -> dict[str, list[float]]:
    """Seconds per call of each candidate, alternating them `warmup + repeats` times; warm-up calls are dropped.

    Alternating means every candidate sees the same machine load (another notebook, a browser, a noisy
    neighbour), so their ratio is fair even when the absolute times drift. `clock=time.process_time` counts the
    CPU seconds of this process instead of wall time: other programs do not inflate it (notebook 03).
    """
    times: dict[str, list[float]] = {name: [] for name in candidates}
    for trial in range(warmup + repeats):
        for name, fn in candidates.items():
            start = clock()
            fn()
            elapsed = clock() - start
            if trial >= warmup:
                times[name].append(elapsed)
    return times


def spread(values: list[float]) -> dict[str, float]:
    """Median, min and max of repeated measurements: report all three, never one lucky run."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


class SavedTensors:
    """Count the bytes autograd saves for the backward pass inside a `with` block (any device).

    Uses `torch.autograd.graph.saved_tensors_hooks`: every tensor an op keeps for its gradient passes through
    `pack`. A storage saved by several ops counts once. Parameters (leaf tensors that require grad, and views of
    them) are counted apart: they exist anyway, so they are not activation memory; the fp16/bf16 copies that
    autocast makes of them are.

        with SavedTensors() as saved:
            loss = model(x).sum()
        saved.activation_bytes, saved.by_dtype
    """

    def __init__(self):
        self.activation_bytes = 0
        self.parameter_bytes = 0
        self.by_dtype: dict[str, int] = {}
        self._seen: set[tuple[int, int]] = set()
        self._hooks = None

    def __enter__(self):
        import torch

        # Every saved tensor passes through `_pack`; what it returns is what autograd keeps (unpacked unchanged).
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda tensor: tensor)
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._hooks.__exit__(*exc)

    def _pack(self, tensor):
        storage = tensor.untyped_storage()
        key = (storage.data_ptr(), storage.nbytes())
        if key not in self._seen:
            self._seen.add(key)
            base = tensor if tensor._base is None else tensor._base  # a weight's transpose is a view of it
            if base.is_leaf and base.requires_grad:
                self.parameter_bytes += storage.nbytes()
            else:
                self.activation_bytes += storage.nbytes()
                name = str(tensor.dtype).removeprefix("torch.")
                self.by_dtype[name] = self.by_dtype.get(name, 0) + storage.nbytes()
        # A detached alias (same storage): returning `tensor` itself would tie a saved output to its own grad_fn
        # through C++, a cycle the garbage collector cannot see, and every graph counted here would stay alive.
        return tensor.detach()


def compare(a: list[float], b: list[float], kind: str = "ratio") -> dict[str, float | bool]:
    """Trial-by-trial comparison of two interleaved measurements: `a[i] / b[i]` ("ratio") or `a[i] - b[i]`
    ("difference"), as a spread with `resolved`: whether that spread excludes 1 (ratio) or 0 (difference).

    The one "resolved on this machine" rule of the course, symmetric: a difference that went the same way in
    every trial is resolved, whichever way it went; if some trials went each way, it is not (notebooks 03 and 04).
    """
    if kind not in ("ratio", "difference"):
        raise ValueError(f"kind={kind!r}: pick 'ratio' or 'difference'")
    if kind == "ratio":
        result, null = spread([x / y for x, y in zip(a, b, strict=True)]), 1.0
    else:
        result, null = spread([x - y for x, y in zip(a, b, strict=True)]), 0.0
    # Resolved: the spread lies wholly on one side of `null`, so every trial went the same way.
    return {**result, "resolved": result["min"] > null or result["max"] < null}
