"""Notebook 03's steps, each measured behind one short call: it measures, prints what it found, and records it.

The counters and the arithmetic live in `memory` (what a tensor or a model holds); this module is the proof
layer of notebook 03 around them:
`RowLab` (the seeded model and batches every step uses), then one function per measured lesson, each with a
docstring that says what it measures and how, and which values it records with `run.record`. Introduced in
notebook 03.
"""

from __future__ import annotations

import weakref

from .i18n import tr
from .memory import (
    MiB,
    PeakBytes,
    address_space_cap_supported,
    tensor_bytes,
)

__all__ = ["RowLab", "activation_sweep", "checkpointing_memory",
           "batch_search", "AliveTensors"]

def _max_abs_diff(xs, ys) -> float:
    return max((x - y).abs().max().item() for x, y in zip(xs, ys, strict=True))


def _largest(tensors) -> float:
    return max(t.abs().max().item() for t in tensors)


class RowLab:
    """Notebook 02's small transformer and its random batches, seeded, on one device (notebook 03's test bench).

    `build(rows)` returns a fresh model with the same starting weights every time; `batch(size, rows, offset)` the
    same examples for the same arguments; `activation_bytes(model, size, rows)` what autograd saves for backward in
    one forward pass (`measure.SavedTensors`; the graph is dropped at once). On a CPU it sets one torch thread:
    small ops gain little from a second OpenMP thread, and stall when the CPU is shared.
    """

    def __init__(self, device_kind: str, seed: int, rows: int, features: int, width: int, layers: int):
        import torch

        self.device = torch.device("cuda" if device_kind == "cuda" else "cpu")
        self.host_of = "" if device_kind in ("cpu", "cuda") else device_kind
        self.seed, self.rows, self.features, self.width, self.layers = seed, rows, features, width, layers
        if self.device.type == "cpu":
            torch.set_num_threads(1)

    def __str__(self) -> str:
        return tr("measuring on {device}").format(device=self.device) + (
            tr(" (the host CPU of this {host})").format(host=self.host_of) if self.host_of else "")

    def build(self, rows: int | None = None):
        from accelerate.utils import set_seed

        from .models import build_row_transformer

        set_seed(self.seed)
        model = build_row_transformer(rows or self.rows, self.features, self.width, self.layers, num_classes=10)
        return model.to(self.device)

    def batch(self, size: int, rows: int | None = None, offset: int = 0):
        import torch

        generator = torch.Generator().manual_seed(self.seed + offset)
        inputs = torch.randn(size, (rows or self.rows) * self.features, generator=generator)  # (B, T * F)
        targets = torch.randint(0, 10, (size,), generator=generator)
        return inputs.to(self.device), targets.to(self.device)

    def activation_bytes(self, model, size: int, rows: int | None = None) -> int:
        import torch.nn.functional as F

        from .measure import SavedTensors

        inputs, targets = self.batch(size, rows)
        with SavedTensors() as saved:
            F.cross_entropy(model(inputs), targets)
        return saved.activation_bytes


def activation_sweep(run, lab: RowLab, model, fixed: dict[str, int], batch_size: int) -> dict[int, int]:
    """Activation bytes at half, once and twice `batch_size`, and at twice the sequence length; print the growth
    and record `memory_breakdown`, `activations_by_seq_len` and both growth factors. Returns bytes by batch size."""
    rows = lab.rows
    by_batch = {size: lab.activation_bytes(model, size) for size in (batch_size // 2, batch_size, 2 * batch_size)}
    by_rows = {rows: by_batch[batch_size], 2 * rows: lab.activation_bytes(lab.build(2 * rows), batch_size, 2 * rows)}
    for size, t, nbytes in [(s, rows, n) for s, n in by_batch.items()] + [(batch_size, 2 * rows, by_rows[2 * rows])]:
        print(tr("batch {size:4}, T={t:4}: activations {mib:7.2f} MiB ({kib:.0f} KiB per example)").format(
            size=size, t=t, mib=nbytes / MiB, kib=nbytes / size / 1024))
    batch_growth, rows_growth = by_batch[2 * batch_size] / by_batch[batch_size], by_rows[2 * rows] / by_rows[rows]
    print(tr("doubling the batch: x{batch_growth:.2f}, doubling T: x{rows_growth:.2f}; weights, gradients and AdamW "
             "state stay {mib:.2f} MiB").format(batch_growth=batch_growth, rows_growth=rows_growth,
                                                  mib=sum(fixed.values()) / MiB))
    run.record(memory_breakdown={**fixed, "activations_per_batch": {str(s): n for s, n in by_batch.items()}},
               activations_by_seq_len={str(t): n for t, n in by_rows.items()},
               activation_growth_batch_x2=batch_growth, activation_growth_seq_x2=rows_growth)
    return by_batch


def checkpointing_memory(run, model, forwards: dict, inputs, targets, fixed: dict[str, int]) -> dict[str, float]:
    """For each forward (plain, checkpointed): what the forward keeps for backward (`SavedTensors`), and the peak of
    the live tensors in the forward and in the backward phase (`PeakBytes`; gradients count, as backward creates
    them). Also the loss and the largest gradient difference. Records `checkpointing_*`; returns both ratios."""
    import torch.nn.functional as F

    from .measure import SavedTensors

    saved, peaks, losses, grads = {}, {}, {}, {}
    for name, forward in forwards.items():
        model.zero_grad(set_to_none=True)
        with SavedTensors() as counter, PeakBytes() as peak:
            loss = F.cross_entropy(forward(inputs), targets)
            peak.phase("backward")  # from here on, the peak of the backward pass
            loss.backward()
        saved[name], peaks[name], losses[name] = counter.activation_bytes, peak.peaks, loss.item()
        grads[name] = [p.grad.clone() for p in model.parameters()]
    backward = {name: peaks[name]["backward"] for name in forwards}
    for what, count in {tr("kept by the forward"): saved, tr("peak during backward"): backward}.items():
        plain, ckpt = count["plain"], count["checkpointed"]
        print(tr("{what:21} plain {plain:6.2f} MiB, checkpointed {ckpt:6.2f} MiB ({less:.0%} less)").format(
            what=what, plain=plain / MiB, ckpt=ckpt / MiB, less=1 - ckpt / plain))
    grad_gap = _max_abs_diff(grads["plain"], grads["checkpointed"])
    same = losses["plain"] == losses["checkpointed"]
    print(tr("same loss: {same}; max |gradient difference| {grad_gap:.1e}; weights, gradients, AdamW state "
             "unchanged ({mib:.2f} MiB)").format(same=same, grad_gap=grad_gap, mib=sum(fixed.values()) / MiB))
    ratios = {"saved": saved["checkpointed"] / saved["plain"], "peak": backward["checkpointed"] / backward["plain"]}
    run.record(checkpointing_activation_bytes=saved, checkpointing_peak_bytes=peaks,
               checkpointing_activation_bytes_ratio=ratios["saved"], checkpointing_backward_peak_ratio=ratios["peak"],
               checkpointing_max_abs_grad_diff=grad_gap, checkpointing_same_loss=same)
    return ratios


def batch_search(run, launch: str, out, device_type: str, budget_mib: int) -> dict | None:
    """Run step 4's `find_batch_size.py` (the `launch` command line, with this kernel's Python, under the launch
    guard) and read its REPORT line; print and record the sizes tried, the errors, whether each size is int(0.9 x
    the previous one). On a CPU where RLIMIT_AS is not enforced it does not
    run (returns None, and records why)."""
    import json
    import os
    import shlex
    import sys

    from .launch import run_launch

    capped, reason = address_space_cap_supported()
    budget = budget_mib if device_type == "cpu" else 0
    run.record(batch_search_ran=device_type == "cuda" or capped, batch_search_reason=reason)
    if not (device_type == "cuda" or capped):
        print(tr("step 4 did not run: {reason}; on a CUDA GPU it runs against the card's memory").format(
            reason=reason))
        return None
    env = {**os.environ, "OMP_NUM_THREADS": "1", "LD_PRELOAD": "",  # glibc's malloc, and big blocks from
           "MALLOC_MMAP_THRESHOLD_": "65536"}  # mmap: the address space follows the tensors
    cmd = [sys.executable, *shlex.split(launch)[1:]]  # `python`: this kernel's Python
    lines = run_launch(cmd, timeout=600, env=env, cwd=out).stdout.splitlines()
    search = json.loads(next(line[len("REPORT "):] for line in lines if line.startswith("REPORT ")))
    tried, errors = search["batch_sizes_tried"], search["errors"]
    follows = all(b == int(a * 0.9) for a, b in zip(tried, tried[1:], strict=False))
    print(tr("on {device}, ").format(device=search["device"])
          + (tr("budget {budget} MiB: {reason}").format(budget=budget, reason=reason) if budget else tr("no cap")))
    print(tr("tried {tried} -> {found} ({errors} out-of-memory errors); each size is "
             "int(0.9 x the previous one): {follows}").format(tried=tried, found=search["found_batch_size"],
                                                              errors=len(errors), follows=follows))
    if errors:
        print(tr("first error:"), errors[0])
    print(tr("a second call of the decorated function tried {tried}").format(tried=search["second_call_tried"]))
    run.record(found_batch_size=search["found_batch_size"], batch_sizes_tried=tried, budget_bytes=budget * MiB,
               cap_bytes=search["cap_bytes"], oom_errors=len(errors), oom_error_first=errors[:1],
               search_follows_x09=follows, second_call_tried=search["second_call_tried"],
               search_device=search["device"])
    return search


class AliveTensors:
    """Weak references to a model's weights and gradients and an optimizer's state: `nbytes()` counts those still
    alive, without keeping any of them alive."""

    def __init__(self, model, optimizer):
        params = list(model.parameters())
        state = [v for s in optimizer.state.values() for v in s.values()]
        self._refs = [weakref.ref(t) for t in [*params, *(p.grad for p in params if p.grad is not None), *state]]

    def nbytes(self) -> int:
        return tensor_bytes(t for t in (ref() for ref in self._refs) if t is not None)
