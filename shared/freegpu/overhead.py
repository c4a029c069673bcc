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

__all__ = ["paired_overhead", "describe", "endless", "one_side", "one_thread"]


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
    spread = f"min {cost['min']:.1f}, max {cost['max']:.1f} over {cost['n']} trials, {cost['calls']} calls a side"
    if cost["resolved"]:
        return f"{name}: {cost['median']:+.1f} µs per step ({spread})"
    return f"{name}: not resolved on this machine ({spread}: the spread includes zero)"


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
