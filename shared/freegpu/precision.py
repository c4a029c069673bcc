"""Mixed precision as it really runs: pick the mode for the hardware, trace the dtypes, read the loss scaler.

Introduced in notebook 02 (mixed precision); notebooks 03 and 05 call `pick_mixed_precision` to set
`Accelerator(mixed_precision=...)`. Notebook 02's proof machinery lives here too (the claims' verdicts, the
GradScaler walk, saved bytes, timings), so that its cells keep the lines they teach. Nothing here imports torch at
import time.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .checks import check_choice
from .hardware import HardwareInfo, recommend
from .i18n import tr

# `Precision`, `MeasuredMode` and `OpRecord` are what the helpers return; notebooks read their fields.
__all__ = ["MODES", "pick_mixed_precision", "measured_mode", "precision_in_effect", "scaler_settings", "DtypeTrace",
           "format_facts", "dtypes_of", "trace_facts", "claim_verdicts", "forward_dtypes", "scaling_report",
           "batches_with_outlier", "walk_scaler", "activation_survey", "step_times", "with_peak", "evaluate",
           "article_verdicts", "simulated_choices"]

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
                         tr("mixed_precision='fp16' does nothing on a CPU (no autocast, no GradScaler, yet "
                            "accelerator.mixed_precision says 'fp16'); using 'no'. Try 'bf16' to see CPU autocast."))
    if requested == "fp16" and kind == "tpu":
        return Precision("bf16", rec.reasons["mixed_precision"],
                         tr("Accelerate refuses fp16 on XLA devices; TPUs compute in bf16, so using 'bf16'."))
    if requested == "bf16" and kind == "cuda" and not all(g.bf16_tensor_cores for g in hw.gpus):
        names = ", ".join(sorted({g.name for g in hw.gpus}))
        return Precision("bf16", tr("bf16 was asked for on {names}").format(names=names),
                         tr("{names} has no bf16 tensor cores: bf16 runs emulated, often slower than fp32; "
                            "use 'fp16' here.").format(names=names))
    return Precision(requested, tr("mixed_precision={requested!r} was asked for").format(requested=requested), None)


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
            return MeasuredMode("bf16", False, tr("bf16 tensor cores (compute capability >= 8.0): no loss "
                                                  "scaling"))
        return MeasuredMode("fp16", False, tr("fp16 tensor cores only (T4, V100: compute capability 7.x); bf16 "
                                              "would be emulated"))
    if hw.device_kind == "tpu":
        return MeasuredMode("bf16", True, tr("TPU: this notebook runs on the host CPU, in bf16; XLA's own bf16 "
                                             "is notebook 04's subject"))
    return MeasuredMode("bf16", False, tr("CPU: fp16 would do nothing here (no autocast), bf16 autocast is real"))


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


# --- notebook 02's proof machinery: each helper measures what one of its cells teaches ------------------------

def format_facts(probes: dict[str, float]) -> dict[str, dict[str, Any]]:
    """`torch.finfo` of fp32, fp16 and bf16 (bits, max, smallest normal, eps), and what each stores of `probes`."""
    import torch

    formats = {}
    for name, dtype in {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}.items():
        fi = torch.finfo(dtype)
        formats[name] = {"bits": fi.bits, "max": fi.max, "smallest_normal": fi.tiny, "eps": fi.eps,
                         "stores": {k: f"{torch.tensor(v).to(dtype).item():.6g}" for k, v in probes.items()}}
    return formats


def dtypes_of(tensors) -> list[str]:
    """The distinct dtypes of `tensors` (parameters, gradients, optimizer state), sorted: `['torch.float32']`."""
    return sorted({str(t.dtype) for t in tensors})


def trace_facts(forward: DtypeTrace, backward: DtypeTrace, mode: str) -> dict[str, Any]:
    """What notebook 02 records of a traced step: each op's dtype, forward and backward, and the casts to `mode`."""
    low = {"fp16": "float16", "bf16": "bfloat16"}.get(mode, "float32")
    return {"autocast_op_dtypes": forward.op_dtypes(), "backward_op_dtypes": backward.op_dtypes(),
            "autocast_weight_casts": forward.count(f"_to_copy(float32->{low})")}


def claim_verdicts(forward: DtypeTrace, backward: DtypeTrace, mode: str, weights: list[str],
                   grads: list[str]) -> list[str]:
    """What one traced training step says about the guide's two claims on fp16, and in which mode it ran.

    `forward` and `backward` trace the prepared model's forward and `accelerator.backward`; `weights` are the
    parameters' dtypes read inside the forward, `grads` those of `.grad`. A bf16 run is never passed off as fp16:
    the first line says which mode the verdicts rest on. Returns printable lines.
    """
    low = {"fp16": "float16", "bf16": "bfloat16"}.get(mode, "float32")
    casts = forward.count(f"_to_copy(float32->{low})")
    backward_mm = backward.op_dtypes().get("mm")
    evidence = (tr("an {mode} run, the claim's own mode").format(mode=mode) if mode == "fp16" else
                tr("a {mode} run: Accelerate's fp16 does nothing on a CPU (step 4). The fp16 trace below is "
                   "PyTorch's autocast alone; Accelerate in fp16 runs only on a CUDA GPU, such as a T4").format(
                    mode=mode))
    weights_16 = weights != ["torch.float32"]
    return [
        tr("evidence: {evidence}").format(evidence=evidence),
        tr("claim 'weights converted to FP16': ") + (tr("holds") if weights_16 else (
            tr("does not hold in {low}: the weights stay {weights}; autocast made {casts} temporary {low} copies of "
               "weights and inputs for the matmuls").format(low=low, weights=weights, casts=casts))),
        tr("claim 'gradients computed in FP32': the backward matmuls (mm) ran in {backward_mm}; ").format(
            backward_mm=backward_mm) + (
            tr("holds") if backward_mm == "float32" else
            tr(".grad is {grads} only because the weights are fp32 (each {low} copy's gradient flows back into its "
               "fp32 weight)").format(grads=grads, low=low)),
    ]


def forward_dtypes(model, inputs) -> list[str]:
    """The dtypes the ops of `model(inputs)` computed in (a `DtypeTrace` of the forward), sorted."""
    with DtypeTrace() as trace:
        model(inputs)
    return sorted(set(trace.op_dtypes().values()))


def scaling_report(reference, plain, scaled, scale: float) -> tuple[dict[str, Any], str]:
    """Did fp16 lose a small gradient without loss scaling, and get it back with it? (notebook 02, step 3)

    `reference` is the fp32 weight gradient; `plain` and `scaled` are (output gradient, unscaled weight gradient)
    of an fp16 run without and with the loss multiplied by `scale`. Returns the facts and a printable summary.
    """
    (y_grad, unscaled), (y_grad_scaled, rescued) = plain, scaled
    error = ((rescued - reference).abs().max() / reference.abs().max()).item()
    facts = {"fp16_underflow_without_scaling": bool((y_grad == 0).all() and (unscaled == 0).all()),
             "fp16_survives_with_scaling": bool((y_grad_scaled != 0).all()) and error < 1e-2,
             "fp16_rescued_relative_error": error}
    text = tr("fp32 weight gradient: mean |g| {mean:.3g}\n"
              "fp16, no scaling: {zero:.0%} of output gradients are zero, weight gradient "
              "all zero: {all_zero}\n"
              "fp16, loss x {scale:g}: {zero_scaled:.0%} zero, unscaled weight gradient "
              "within {error:.2%} of fp32").format(
        mean=reference.abs().mean().item(), zero=(y_grad == 0).float().mean().item(),
        all_zero=bool((unscaled == 0).all()), scale=scale, zero_scaled=(y_grad_scaled == 0).float().mean().item(),
        error=error)
    return facts, text


def batches_with_outlier(tensors, batch_size: int, steps: int, outlier_step: int, device, value: float = 1e5):
    """`steps` consecutive batches of (inputs, targets); in batch `outlier_step` one pixel is `value`.

    1e5 is beyond fp16's largest number (65504): autocast turns it into inf, and the loss and gradients of that
    step become inf or NaN, which is what the GradScaler must catch.
    """
    images, labels = tensors
    for step in range(steps):
        batch = slice(step * batch_size, (step + 1) * batch_size)
        inputs, targets = images[batch].clone().to(device), labels[batch].to(device)
        if step == outlier_step:
            inputs[0, 0] = value
        yield inputs, targets


class ScalerWalk(NamedTuple):
    """One row per step (scale before and after, loss, skipped, AdamW's step count), and the scales in order."""

    rows: list[dict[str, Any]]
    scales: list[float]
    skipped: list[int]

    def table(self) -> dict[str, str]:
        return {tr("step {step}").format(step=r["step"]): tr(
                    "scale {scale:g} -> {next_scale:g}, loss {loss}, {outcome}, AdamW steps {optimizer_steps}").format(
                    scale=r["scale"], next_scale=r["next_scale"], loss=r["loss"],
                    outcome=tr("SKIPPED") if r["skipped"] else tr("stepped"), optimizer_steps=r["optimizer_steps"])
                for r in self.rows}


def walk_scaler(train_step, scaler, optimizer, batches) -> ScalerWalk:
    """Run `train_step(inputs, targets)` (which calls `scaler.scale`, `scaler.step`, `scaler.update`) per batch.

    Before each step it reads the scale and copies the first parameter; after it, a step is *skipped* when that
    parameter is bit for bit unchanged. AdamW's own step count (`optimizer.state[p]["step"]`) shows the same.
    """
    import torch

    first = optimizer.param_groups[0]["params"][0]
    rows = []
    for step, (inputs, targets) in enumerate(batches):
        scale, before = scaler.get_scale(), first.detach().clone()
        loss = train_step(inputs, targets)
        rows.append({"step": step, "scale": scale, "loss": f"{loss.item():.4f}", "next_scale": scaler.get_scale(),
                     "skipped": torch.equal(before, first.detach()),
                     "optimizer_steps": int(optimizer.state[first].get("step", 0))})
    return ScalerWalk(rows, [r["scale"] for r in rows] + [rows[-1]["next_scale"]],
                      [r["step"] for r in rows if r["skipped"]])


def _autocast(device_type: str, precision: str):
    """`torch.autocast` in `precision` ("no", "fp16", "bf16"); disabled for "no" (fp32)."""
    import torch

    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision, torch.bfloat16)
    return torch.autocast(device_type, dtype=dtype, enabled=precision != "no")


def saved_activation_bytes(model, inputs, targets, precision: str) -> tuple[int, dict[str, int]]:
    """Bytes autograd keeps for backward in one forward and loss, under autocast in `precision` ("no": fp32).

    Counted with `freegpu.measure.SavedTensors` (parameters apart): the activations only, on any device. Returns
    the total and its split by dtype.
    """
    import torch.nn.functional as F

    from .measure import SavedTensors

    with SavedTensors() as saved, _autocast(inputs.device.type, precision):
        F.cross_entropy(model(inputs), targets)
    return saved.activation_bytes, saved.by_dtype


def activation_survey(make_model, inputs, targets, precisions: list[str]) -> tuple[dict[str, Any], str]:
    """`saved_activation_bytes` of a fresh `make_model()` in each precision; the first is the baseline (fp32).

    Returns the facts notebook 02 records (`activation_bytes`, `activation_bytes_by_dtype` and
    `activation_bytes_ratio`, the second precision over the first) and a printable line.
    """
    saved = {p: saved_activation_bytes(make_model(), inputs, targets, p) for p in dict.fromkeys(precisions)}
    total = {p: bytes_ for p, (bytes_, _) in saved.items()}
    base, mode = precisions[:2]
    facts = {"activation_bytes": total, "activation_bytes_by_dtype": {p: d for p, (_, d) in saved.items()},
             "activation_bytes_ratio": total[mode] / total[base]}
    text = (tr("saved for backward, one batch of {batch}: ").format(batch=len(inputs))
            + ", ".join(f"{p} {b / 2**20:.2f} MiB" for p, b in total.items())
            + f"; {mode}/{base} = {facts['activation_bytes_ratio']:.2f}")
    return facts, text


def step_times(train, names: tuple[str, ...], steps: int, trials: int) -> tuple[dict[str, Any], str]:
    """Milliseconds per training step of `train(name, steps)` for each name, with the spread (notebook 02).

    Interleaved trials after one warm-up each (`measure.interleaved_timings`). Returns the facts notebook 02
    records and a printable report: `step_time_ms` (each name's spread), `step_time_ratio` (the second name's
    median over the first's) and `step_time_resolved`, False when the two ranges (min to max) overlap: then the
    ratio is not a finding on this machine.
    """
    from .measure import interleaved_timings, spread

    candidates = {name: (lambda name=name: train(name, steps)) for name in names}
    timings = interleaved_timings(candidates, repeats=trials, warmup=1)
    ms = {name: spread([1000 * t / steps for t in times]) for name, times in timings.items()}
    (base_name, base), (name, other) = ms.items()
    resolved = other["min"] > base["max"] or other["max"] < base["min"]
    ratio = other["median"] / base["median"]
    line = tr("{name:>4}: median {median:.2f} ms/step (min {min:.2f}, max {max:.2f}, {n} trials)")
    lines = [line.format(name=n, median=s["median"], min=s["min"], max=s["max"], n=s["n"]) for n, s in ms.items()]
    lines.append(tr("{name} / {base_name} time per step: {ratio:.2f}").format(name=name, base_name=base_name,
                                                                               ratio=ratio)
                 + ("" if resolved else tr(" (the ranges overlap: not resolved on this machine)")))
    return {"step_time_ms": ms, "step_time_ratio": ratio, "step_time_resolved": resolved}, "\n".join(lines)


def with_peak(device, fn, *args) -> tuple[Any, int | None]:
    """`fn(*args)` and, on a CUDA device, the peak bytes allocated while it ran; `None` elsewhere."""
    if device.type != "cuda":
        return fn(*args), None
    import torch

    torch.cuda.reset_peak_memory_stats(device)
    result = fn(*args)
    return result, torch.cuda.max_memory_allocated(device)


def evaluate(model, tensors, precision: str) -> tuple[float, float]:
    """Cross-entropy and accuracy of `model` on `tensors` (images, labels), the forward under `precision`.

    The tensors are moved to the device of the model's first parameter.
    """
    import torch
    import torch.nn.functional as F

    device = next(model.parameters()).device
    images, labels = (t.to(device) for t in tensors)
    with torch.no_grad(), _autocast(images.device.type, precision):
        logits = model(images).float()
    return F.cross_entropy(logits, labels).item(), (logits.argmax(-1) == labels).float().mean().item()


def article_verdicts(saved: dict[str, Any], times: dict[str, Any], peak_memory_bytes: dict[str, int], mode: str,
                     native_amp: bool) -> list[str]:
    """Notebook 02's sentences on the articles' claims, from this run's numbers, saying what each one compares.

    `saved` and `times` are the facts of `activation_survey` and `step_times`; `saved["activation_bytes"]` has
    "no" (fp32), `mode` and "fp16" (PyTorch's autocast alone). `peak_memory_bytes` is empty unless a CUDA GPU ran
    (then it has "no" and `mode`).
    """
    activation_bytes, lines = saved["activation_bytes"], []
    for precision in dict.fromkeys([mode, "fp16"]):
        if precision in activation_bytes:
            saving = 1 - activation_bytes[precision] / activation_bytes["no"]
            lines.append(tr("activations, {precision}: {saving:.0%} fewer bytes kept for backward than fp32.").format(
                precision=precision, saving=saving))
    lines.append(tr("The guide's reason is 'activations stored in FP16'. Its claim, 'nearly half of the GPU memory', "
                    "counts all GPU memory. Weights, .grad and AdamW state stay fp32 (step 2)."))
    if peak_memory_bytes:
        lines.append(tr("GPU peak memory, {mode} / fp32: {ratio:.2f}.").format(
            mode=mode, ratio=peak_memory_bytes[mode] / peak_memory_bytes["no"]))
    else:
        lines.append(tr("GPU peak memory: not measured, there is no CUDA GPU here (a Colab or Kaggle T4 measures "
                        "it)."))
    speed = tr("{mode} step time / fp32: {ratio:.2f}").format(mode=mode, ratio=times["step_time_ratio"])
    lines.append(speed + ("" if times["step_time_resolved"] else
                          tr(" (the ranges overlap: not resolved on this machine)"))
                 + ("" if peak_memory_bytes else tr("; a CPU has no tensor cores, so this says nothing of a GPU.")))
    how = tr("op for op") if native_amp else tr("with differences (see step 2)")
    lines.append(tr("the +44% row: both columns are fp16, and Accelerate ran torch.autocast {how} (in {mode} "
                    "here), so mixed precision alone does not explain the gap; the article does not say what "
                    "does.").format(how=how, mode=mode))
    return lines


def simulated_choices(gpus: dict[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """What `pick_mixed_precision` answers on each simulated GPU box (`label: nvidia-smi line(s)`)."""
    from .hardware import FREE_GPUS, detect_hardware

    gpus = FREE_GPUS if gpus is None else gpus
    choices = {}
    for label, smi in gpus.items():
        sim = detect_hardware(nvidia_smi=smi, topology="")
        choices[label] = {"auto": pick_mixed_precision(sim, "auto").mode,
                          "bf16 request warns": pick_mixed_precision(sim, "bf16").warning is not None}
    return choices
