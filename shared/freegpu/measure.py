"""Measure what the notebooks claim: repeated timings with their spread, bytes saved for backward, loader speed.

`interleaved_timings`, `spread` and `compare`: repeated timings and the one "resolved" rule, for notebooks 02-05.
`SavedTensors`: notebook 02 (what autocast saves), reused by 03 (checkpointing). `loader_throughput`
and `compare_loaders`: notebook 04.
"""

from __future__ import annotations

import statistics
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass

from .i18n import tr

__all__ = ["interleaved_timings", "spread", "compare", "SavedTensors",
           "loader_throughput", "compare_loaders", "LoaderComparison"]


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


def loader_throughput(dataset, epochs: int = 1, **loader_kwargs) -> dict:
    """Samples per second a `DataLoader(dataset, **loader_kwargs)` delivers over `epochs` full passes.

    Worker start-up counts: it is what every epoch pays unless `persistent_workers=True`. Returns
    `samples_per_s`, `first_batch_s` (time to the first batch) and the `warnings` the DataLoader raised.
    """
    from torch.utils.data import DataLoader

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loader = DataLoader(dataset, **loader_kwargs)
        samples, first_batch = 0, None
        start = time.perf_counter()
        for _ in range(epochs):
            for inputs, _targets in loader:
                first_batch = first_batch if first_batch is not None else time.perf_counter() - start
                samples += len(inputs)
        elapsed = time.perf_counter() - start
        del loader  # stops persistent workers
    return {"samples_per_s": samples / elapsed, "first_batch_s": first_batch,
            "warnings": sorted({str(w.message) for w in caught})}


@dataclass
class LoaderComparison:
    """What `compare_loaders` measured: each setting's passes (samples/s), their spread, its DataLoader's warnings."""

    passes: dict
    samples_per_s: dict
    warnings: dict

    def lines(self, prefix: str = "") -> str:
        """One line per setting: its median samples/s, with min and max."""
        line = tr("{prefix}{label!s:<4} {median:6.0f} samples/s (min {min:.0f}, max {max:.0f})")
        return "\n".join(line.format(prefix=prefix, label=label, median=s["median"], min=s["min"], max=s["max"])
                         for label, s in self.samples_per_s.items())


def compare_loaders(settings: dict, repeats: int = 3, epochs: int = 1, **common) -> LoaderComparison:
    """Samples/s of `DataLoader(**common, **setting)` for each setting, `repeats` passes each, interleaved.

    Interleaved: pass 1 of every setting, then pass 2 of every setting, and so on, so that all settings see the
    same machine load. A setting (or `common`) may hold `dataset`, the dataset it reads; every other key is a
    `DataLoader` argument. `warnings` are those of each setting's first pass (notebook 04).
    """
    passes = {label: [] for label in settings}
    warned = {}
    for _ in range(repeats):
        for label, setting in settings.items():
            kwargs = {**common, **setting}
            measured = loader_throughput(kwargs.pop("dataset"), epochs=epochs, **kwargs)
            passes[label].append(measured["samples_per_s"])
            warned.setdefault(label, measured["warnings"])
    return LoaderComparison(passes, {label: spread(values) for label, values in passes.items()}, warned)


def compare(a: list[float], b: list[float], kind: str = "ratio") -> dict[str, float | bool]:
    """Trial-by-trial comparison of two interleaved measurements: `a[i] / b[i]` ("ratio") or `a[i] - b[i]`
    ("difference"), as a spread with `resolved`: whether that spread excludes 1 (ratio) or 0 (difference).

    The one "resolved on this machine" rule of the course, symmetric: a difference that went the same way in
    every trial is resolved, whichever way it went; if some trials went each way, it is not (notebooks 01-06).
    """
    if kind not in ("ratio", "difference"):
        raise ValueError(f"kind={kind!r}: pick 'ratio' or 'difference'")
    if kind == "ratio":
        result, null = spread([x / y for x, y in zip(a, b, strict=True)]), 1.0
    else:
        result, null = spread([x - y for x, y in zip(a, b, strict=True)]), 0.0
    # Resolved: the spread lies wholly on one side of `null`, so every trial went the same way.
    return {**result, "resolved": result["min"] > null or result["max"] < null}
