"""Measure what the notebooks claim: repeated timings with their spread, bytes saved for backward, loader speed.

`interleaved_timings`, `spread` and `compare`: repeated timings and the one "resolved" rule, for notebooks 02-05.
`SavedTensors`: notebook 02 (what autocast saves), reused by 03 (checkpointing). `loader_throughput`,
`compare_loaders`, `ratio_spread`, `is_resolved`, `ratio_line`, `workers_verdict` and `plot_experiments`:
notebook 04.
"""

from __future__ import annotations

import statistics
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass

from .i18n import tr

__all__ = ["interleaved_timings", "spread", "compare", "SavedTensors",
           "loader_throughput", "compare_loaders", "ratio_line", "workers_verdict", "plot_experiments",
           "LoaderComparison"]


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


class PackHooks:
    """Base of the `with` blocks that watch what autograd saves for backward: a subclass defines `_pack(tensor)`,
    which sees every saved tensor and returns what autograd keeps (unpacking gives it back unchanged)."""

    _hooks = None

    def _pack(self, tensor):
        raise NotImplementedError

    def __enter__(self):
        import torch

        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda tensor: tensor)
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._hooks.__exit__(*exc)


class SavedTensors(PackHooks):
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

    def ratio(self, numerator, denominator) -> dict[str, float]:
        """The spread of `numerator`'s samples/s over `denominator`'s, trial by trial (`ratio_spread`)."""
        return ratio_spread(self.passes[numerator], self.passes[denominator])

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
        result, null = ratio_spread(a, b), 1.0
    else:
        result, null = spread([x - y for x, y in zip(a, b, strict=True)]), 0.0
    return {**result, "resolved": _excludes(result, null)}


def _excludes(values: dict[str, float], null: float) -> bool:
    """Whether a spread lies wholly on one side of `null`: every trial went the same way."""
    return values["min"] > null or values["max"] < null


def ratio_spread(numerators: list[float], denominators: list[float]) -> dict[str, float]:
    """The spread of per-trial ratios of two interleaved measurements (trial i over trial i), notebook 04."""
    return spread([a / b for a, b in zip(numerators, denominators, strict=True)])


def is_resolved(ratio: dict[str, float]) -> bool:
    """Whether a ratio's spread excludes 1: if some trials went each way, the difference is not resolved here."""
    return _excludes(ratio, 1.0)


def ratio_line(what: str, ratio: dict[str, float]) -> str:
    """`what: median (min, max)` of a ratio's spread, ending "not resolved on this machine" if it includes 1."""
    line = tr("{what}: {median:.2f} (min {min:.2f}, max {max:.2f}, {n} trials)").format(
        what=what, median=ratio["median"], min=ratio["min"], max=ratio["max"], n=ratio["n"])
    return line if is_resolved(ratio) else tr("{line}: not resolved on this machine").format(line=line)


def workers_verdict(by_workers: LoaderComparison, rule_workers: int, rule_reason: str) -> tuple[int, bool, str]:
    """The fastest worker count, whether the rule's count was the fastest or within its spread, and what to print.

    `by_workers` is `compare_loaders` over worker counts (ascending; the last is "4 x cores", whose warnings are
    quoted). The rule is within the spread when its best pass reached the fastest count's worst (notebook 04).
    """
    samples_per_s = by_workers.samples_per_s
    oversubscribed = by_workers.warnings[list(samples_per_s)[-1]]
    counts = list(samples_per_s)
    best_count = max(counts, key=lambda n: samples_per_s[n]["median"])
    best, rule = samples_per_s[best_count], samples_per_s[rule_workers]
    in_spread = rule["max"] >= best["min"]
    if rule_workers == best_count:
        rule_verdict = tr("the fastest.")
    else:
        rule_verdict = tr("{share:.0%} of the fastest, ").format(share=rule["median"] / best["median"]) + (
            tr("within the spread of the passes.") if in_spread else tr("outside the spread."))
    lines = [tr("Fastest here: num_workers={count}, {median:.0f} samples/s (median).").format(
                 count=best_count, median=best["median"]),
             tr("The rule ({reason}) gave num_workers={count}: ").format(reason=rule_reason, count=rule_workers)
             + rule_verdict,
             tr("'4 x cores' = {count} workers: {share:.0%} of the fastest; PyTorch said: {said}").format(
                 count=counts[-1], share=samples_per_s[counts[-1]]["median"] / best["median"],
                 said=" ".join(oversubscribed) or tr("nothing"))]
    return best_count, rule_workers == best_count or in_spread, "\n".join(lines)


def plot_experiments(experiments: dict[str, dict[str, dict]], title: str, path) -> None:
    """One horizontal bar chart per experiment (medians, min-max as error bars), side by side, saved to `path`.

    `experiments` maps an experiment's name to `{setting: spread}`. Each experiment gets its own axis, because
    their numbers come from different loads (a full pass, two short epochs) and must not be compared bar to bar
    (notebook 04).
    """
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(experiments), figsize=(4.2 * len(experiments), 3.2), squeeze=False)
    for ax, (name, spreads) in zip(axes[0], experiments.items(), strict=True):
        labels = [str(label) for label in spreads]
        medians = [s["median"] for s in spreads.values()]
        errors = [[s["median"] - s["min"] for s in spreads.values()],
                  [s["max"] - s["median"] for s in spreads.values()]]
        ax.barh(labels, medians, xerr=errors, color="tab:blue", capsize=3)
        ax.set(title=name, xlabel="samples / s (median, min-max)")
        ax.invert_yaxis()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.show()
