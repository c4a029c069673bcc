"""What Accelerate adds to a training step, line by line (notebook 01, step 4).

`paired_overhead` times each line of a step twice, as plain PyTorch writes it and through the objects that
`accelerator.prepare` returned, alternating the two call by call, and reports the difference per step with its
spread over trials. `describe` says it in one line, "not resolved on this machine" when the spread includes zero.
`endless` yields batches epoch after epoch, `one_side` runs one side alone (for a profiler), `one_thread` pins
torch to one thread for a timing.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
from collections.abc import Callable, Iterator, Mapping

from .i18n import tr

__all__ = ["paired_overhead", "describe", "endless", "one_side", "one_thread", "step_objects", "step_pairs",
           "plain_step_ms", "share_lines", "plot_overhead", "extra_functions", "trace_summary",
           "overhead_summary", "describe_all"]


def _paired(pair: tuple[Callable[[], object], Callable[[], object]], calls: int,
            clock) -> tuple[float, float, float]:
    """Medians over `calls` of (prepared - plain) seconds, of plain's seconds and of both sides' seconds together.

    Which side goes first alternates from call to call."""
    differences, plain_seconds, both = [], [], []
    for i in range(calls):
        seconds = [0.0, 0.0]
        for side in (0, 1) if i % 2 == 0 else (1, 0):
            start = clock()
            pair[side]()
            seconds[side] = clock() - start
        differences.append(seconds[1] - seconds[0])
        plain_seconds.append(seconds[0])
        both.append(seconds[0] + seconds[1])
    return statistics.median(differences), statistics.median(plain_seconds), statistics.median(both)


def _spread(values: list[float], calls: int) -> dict:
    low, high = min(values), max(values)
    return {"median": statistics.median(values), "min": low, "max": high, "n": len(values), "calls": calls,
            "resolved": low > 0 or high < 0}


def paired_overhead(pairs: Mapping[str, tuple[Callable[[], object], Callable[[], object]]], calls: int = 2000,
                    trials: int = 5, warmup: float = 0.1, budget_s: float | None = None,
                    clock: Callable[[], float] = time.perf_counter) -> dict[str, dict]:
    """The extra µs of each line of a step in `pairs`, and of the whole step, with their spread over trials.

    `pairs[name]` is `(plain, prepared)`: two callables doing one step's worth of the same line, one as plain
    PyTorch writes it, one through the objects `accelerator.prepare` returned. Each is called `calls` times,
    split over `trials` trials after a warm-up of `warmup` of a trial's calls, the two sides alternating call by
    call, so both see the same machine load. A trial's value is the median of its paired differences; `median`,
    `min` and `max` are over the trials, `resolved` says whether that spread excludes zero, `calls` counts the
    calls of each side. Returns `{"lines": {name: {..., "plain_us"}}, "per_step": {...}}`, where each trial of
    `per_step` adds up that trial's lines. With `budget_s`, a line whose warm-up calls show that it would take
    more than its equal share of `budget_s` gets fewer calls (a big batch makes every call slow); `calls` says
    how many ran. Introduced in notebook 01.
    """
    per_trial = max(1, math.ceil(calls / trials))
    planned = {}
    for name, pair in pairs.items():  # first calls: lazy imports, caches, allocations; and what a call costs
        *_, pair_s = _paired(pair, max(1, round(warmup * per_trial)), clock)
        affordable = per_trial if budget_s is None else budget_s / len(pairs) / trials / max(pair_s, 1e-9)
        planned[name] = max(1, min(per_trial, math.floor(affordable)))
    extra: dict[str, list[float]] = {name: [] for name in pairs}
    plain_us: dict[str, list[float]] = {name: [] for name in pairs}
    for _ in range(trials):
        for name, pair in pairs.items():
            difference, base, _ = _paired(pair, planned[name], clock)
            extra[name].append(1e6 * difference)
            plain_us[name].append(1e6 * base)
    counted = {name: planned[name] * trials for name in pairs}
    lines = {name: {**_spread(extra[name], counted[name]), "plain_us": statistics.median(plain_us[name])}
             for name in pairs}
    totals = [sum(values[trial] for values in extra.values()) for trial in range(trials)]
    return {"lines": lines, "per_step": _spread(totals, min(counted.values()))}


def describe(name: str, cost: dict) -> str:
    """One line for a `paired_overhead` entry; an unresolved one says so and gives its spread, not a number."""
    spread = tr("min {min:.1f}, max {max:.1f} over {n} trials, {calls} calls a side").format(
        min=cost["min"], max=cost["max"], n=cost["n"], calls=cost["calls"])
    if cost["resolved"]:
        return tr("{name}: {median:+.1f} µs per step ({spread})").format(name=name, median=cost["median"],
                                                                        spread=spread)
    return tr("{name}: not resolved on this machine ({spread}: the spread includes zero)").format(name=name,
                                                                                                 spread=spread)


def describe_all(costs: dict) -> str:
    """`describe` for each line of a `paired_overhead` result, then for the whole step, one per line."""
    every = {**costs["lines"], tr("whole step"): costs["per_step"]}
    return "\n".join(describe(name, cost) for name, cost in every.items())


def one_side(pairs: Mapping[str, tuple], side: int, steps: int) -> None:
    """Run one side of `pairs` (0 plain, 1 prepared), every line `steps` times in a row: what a profiler watches."""
    for pair in pairs.values():
        for _ in range(steps):
            pair[side]()


def endless(dataloader) -> Iterator:
    """The batches of `dataloader`, epoch after epoch; a new epoch starts inside the `next` that needs it."""
    while True:
        yield from dataloader


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """torch on one thread inside the block, the caller's setting after: on a busy machine two threads wait for
    each other, and timings wobble (notebook 01)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def step_objects(dims: tuple[int, int, int], dataset, batch_size: int, learning_rate: float, seed: int, device,
                 most_steps: int = 32) -> tuple:
    """(model, AdamW, DataLoader) as notebook 01's `train_plain` makes them, the model on `device`.

    The model is `models.build_mlp(*dims)` after `set_seed(seed)`: two calls give the same weights. The
    DataLoader holds the first whole batches of `dataset` (at most `most_steps`), unshuffled: every step does
    the same work.
    """
    import torch
    from accelerate.utils import set_seed
    from torch.utils.data import DataLoader, Subset

    from .models import build_mlp

    steps = max(1, min(len(dataset) // batch_size, most_steps))
    timed = Subset(dataset, range(min(len(dataset), steps * batch_size)))
    set_seed(seed)
    model = build_mlp(*dims).to(device)
    return model, torch.optim.AdamW(model.parameters(), lr=learning_rate), DataLoader(timed, batch_size)


def step_pairs(plain: tuple, prepared: tuple, accelerator) -> dict[str, tuple[Callable[[], object],
                                                                               Callable[[], object]]]:
    """The four lines of a step that the migration changed, each as (plain PyTorch, through `prepare`'s objects).

    `plain` and `prepared` are (model, optimizer, DataLoader) triples (`step_objects`, and what
    `accelerator.prepare` returned for a copy). "next batch" moves a plain batch to the device by hand; the
    prepared DataLoader yields it there. "forward, backward" runs on one fixed batch, with `loss.backward()` or
    `accelerator.backward(loss)`. For `paired_overhead` and `one_side`.
    """
    import torch.nn.functional as F

    (model, optimizer, loader), (p_model, p_optimizer, p_loader) = plain, prepared
    device = accelerator.device
    inputs, targets = (t.to(device) for t in next(iter(loader)))  # one batch, for the forward
    plain_batches, prepared_batches = endless(loader), endless(p_loader)
    return {
        "next batch": (lambda: [t.to(device) for t in next(plain_batches)], lambda: next(prepared_batches)),
        "optimizer.zero_grad()": (optimizer.zero_grad, p_optimizer.zero_grad),
        "forward, backward": (lambda: F.cross_entropy(model(inputs), targets).backward(),
                              lambda: accelerator.backward(F.cross_entropy(p_model(inputs), targets))),
        "optimizer.step()": (optimizer.step, p_optimizer.step),
    }


def plain_step_ms(train: Callable, dims: tuple[int, int, int], widths: Mapping[str, int], dataloader,
                  learning_rate: float, seed: int, trials: int) -> dict[str, dict]:
    """Milliseconds per step of the plain loop `train` (notebook 01's `train_plain`) at each hidden width of
    `widths`, with the spread over `trials` trials.

    One MLP per width (`dims` with its hidden size replaced). A trial runs one epoch of `train` per width over
    `dataloader`'s batches, the widths alternating, after a warm-up (`measure.interleaved_timings`).
    """
    from .measure import interleaved_timings, spread
    from .models import build_mlp

    models = {name: build_mlp(dims[0], width, dims[2]) for name, width in widths.items()}
    dataset, batch_size, steps = dataloader.dataset, dataloader.batch_size, len(dataloader)
    epochs = {name: lambda m=m: train(m, dataset, 1, batch_size, learning_rate, seed) for name, m in models.items()}
    seconds = interleaved_timings(epochs, repeats=trials)
    return {name: spread([1e3 * s / steps for s in seconds[name]]) for name in widths}


def share_lines(plain_ms: Mapping[str, dict], share: Mapping[str, float], per_step: dict) -> str:
    """One line per model size: the plain step time with its spread, and Accelerate's extra as a share of it,
    or "not resolved on this machine" when the extra's spread includes zero."""
    lines = []
    for name, ms in plain_ms.items():
        verdict = (tr("{share:.1%} of it").format(share=share[name]) if per_step["resolved"]
                   else tr("not resolved on this machine"))
        lines.append(tr("{name:12} plain step {median:6.3f} ms (min {min:.3f}, max {max:.3f}); "
                        "Accelerate's extra: {verdict}").format(name=name, median=ms["median"], min=ms["min"],
                                                                max=ms["max"], verdict=verdict))
    return "\n".join(lines)


def overhead_summary(costs: dict) -> dict:
    """What notebook 01 records of `paired_overhead`'s result: each line's cost, the whole step's, and the verdict
    (`describe`): a number only where the spread excludes zero."""
    return {"overhead_by_line": costs["lines"], "overhead_us_per_step": costs["per_step"],
            "overhead_verdict": describe("Accelerate's extra", costs["per_step"])}


def plot_overhead(overhead: dict, plain_ms: Mapping[str, dict], share: Mapping[str, float], device, folder) -> None:
    """Two panels, saved to `folder/overhead_vs_step_time.png` and shown: each line's extra µs (median, min-max;
    a bar crossing zero is not resolved), and the whole step's extra as a share of a plain step at each size."""
    from pathlib import Path

    import matplotlib.pyplot as plt

    lines, per_step = overhead["lines"], overhead["per_step"]
    costs = list(lines.values())
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.5))
    left.barh(list(lines), [c["median"] for c in costs], capsize=4, xerr=[
        [c["median"] - c["min"] for c in costs], [c["max"] - c["median"] for c in costs]])
    left.axvline(0, color="gray", linewidth=0.8)
    left.invert_yaxis()
    left.set(xlabel="extra µs per step (median, min-max)",
             title=f"{per_step['calls']} calls a side, {per_step['n']} trials ({device})")
    right.plot([ms["median"] for ms in plain_ms.values()], [100 * s for s in share.values()], "o-")
    verdict = f"{per_step['median']:+.1f} µs per step" if per_step["resolved"] else "not resolved on this machine"
    # Plot text stays English in a zh run too (not `describe`, which is translated): Colab has no CJK font.
    right.set(xscale="log", xlabel="plain step (ms, median)", ylabel="Accelerate's extra (% of the step)",
              title=f"Accelerate's extra: {verdict}")
    fig.savefig(Path(folder) / "overhead_vs_step_time.png", dpi=120, bbox_inches="tight")
    plt.show()


def extra_functions(pairs: Mapping[str, tuple], steps: int, top: int = 5) -> dict:
    """Where Accelerate's extra time goes: each side of `pairs` run `steps` times under cProfile
    (`measure.python_overhead`), and the library functions only the prepared side calls, ranked.

    Returns what notebook 01 records: `top_overhead_functions` (at most `top` names), `top_overhead_shares`
    (each one's share of the profiled extra; nested functions overlap) and `profiled_extra_us_per_step`
    (cProfile inflates it: read the ranking, not the microseconds).
    """
    from .measure import python_overhead

    found = python_overhead(lambda: one_side(pairs, 0, steps), lambda: one_side(pairs, 1, steps), steps=steps,
                            top=top)
    return {"top_overhead_functions": [f["function"] for f in found],
            "top_overhead_shares": {f["function"]: f["share"] for f in found},
            "profiled_extra_us_per_step": found[0]["profiled_extra_us_per_step"]}


def trace_summary(profiler, steps: int, trace_dir) -> dict:
    """What notebook 01 records of an `accelerator.profile` run over `steps` steps: the trace files written to
    `trace_dir`, the operator with the most self CPU time, and the self CPU µs per step of all operators."""
    from pathlib import Path

    events = profiler.key_averages()
    return {"trace_files": sorted(p.name for p in Path(trace_dir).iterdir()),
            "profiled_top_operator": max(events, key=lambda e: e.self_cpu_time_total).key,
            "profiled_self_cpu_us_per_step": sum(e.self_cpu_time_total for e in events) / steps}
