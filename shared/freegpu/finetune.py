"""The fine-tuning loop and the evaluation taught in notebook 05, for the tests and the notebooks that reuse them.

Importing this module imports torch and Accelerate. `tests/test_05_bert_finetune.py` checks that
`train_classifier` and `evaluate_classifier` are, character for character, the ones notebook 05 writes out.
`JsonlTracker` gives `accelerator.log` somewhere to write where TensorBoard is not installed.
`optimizer_step_ms` times one `step()` of several optimizers on a copy of a model's weights (05's step 4).
`LossLog` is the loop's bookkeeping (losses read from the device once per window, logged, timed).
`start_finetune`, `describe_model`, `logit_diff_to_alone`, `forward_ms`, `ratio_report`, `savable`,
`pipeline_accuracy` and `count_xla_compiles` are 05's proof machinery, each behind one call of the notebook.
"""

from __future__ import annotations

import importlib.util
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from accelerate.tracking import GeneralTracker
from accelerate.utils import is_tensorboard_available, tqdm
from sklearn.metrics import accuracy_score, f1_score

from .i18n import tr
from .measure import interleaved_timings, spread

__all__ = ["start_finetune", "pick_trackers", "describe_model", "logit_diff_to_alone", "forward_ms",
           "optimizer_step_ms", "ratio_report", "LossLog", "train_classifier", "throughput_after_warmup",
           "savable", "pipeline_accuracy", "evaluate_classifier", "count_xla_compiles"]


class JsonlTracker(GeneralTracker):
    """An Accelerate tracker that appends each `accelerator.log(...)` call as one JSON line to `metrics.jsonl`."""

    name = "jsonl"
    requires_logging_directory = True

    def __init__(self, run_name: str, logging_dir: str | Path):
        super().__init__()
        self.path = Path(logging_dir) / run_name / "metrics.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)

    @property
    def tracker(self):
        return self.path

    def store_init_configuration(self, values: dict) -> None:
        (self.path.parent / "config.json").write_text(json.dumps(values, indent=2, default=str) + "\n")

    def log(self, values: dict, step: int | None = None, **kwargs) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps({"step": step, **values}) + "\n")


def pick_trackers(project_dir: str | Path, run_name: str) -> tuple[list, str]:
    """`log_with=` for `Accelerator`: TensorBoard where it is installed (Colab, Kaggle), always a JSON-lines file.

    Returns the list and a sentence saying what was picked and why.
    """
    trackers: list = [JsonlTracker(run_name, project_dir)]
    if is_tensorboard_available():
        trackers.append("tensorboard")
        return trackers, tr("TensorBoard (installed) and {file}").format(file=trackers[0].path.name)
    return trackers, tr("{file} only: TensorBoard is not installed here (pip install tensorboard)").format(
        file=trackers[0].path.name)


@dataclass(frozen=True)
class FinetuneSetup:
    """What `start_finetune` found: the platform, the hardware, the profile and whether XLA runs."""

    info: Any
    hw: Any
    profile: str
    xla_ran: bool
    xla_reason: str
    report: str

    @property
    def interactive(self) -> bool:
        """Whether someone watches this kernel (Jupyter, Colab, Kaggle's editor): progress bars only then."""
        return self.info.interactive


def start_finetune(notebook: str, parameters: dict[str, Any], out: Path):
    """Notebook 05's start: platform, hardware and profile (`freegpu.notebook.begin`), XLA, quiet libraries, the run.

    A full profile that reads the Hub while it is offline stops here, before any download. Where torch_xla is
    installed, `PJRT_DEVICE` is set before it starts ("TPU" on a TPU, else XLA's CPU backend). The Rust tokenizer's
    threads are switched off (`TOKENIZERS_PARALLELISM`): a fork after they ran can deadlock. Progress bars are off
    where nobody watches (they would stay at 0% in a saved output), and transformers' warnings are off: its load
    report names this machine's folders, and the notebook prints what it says. Prints what it found; returns
    `(setup, run)`.
    """
    import datasets
    from transformers.utils import logging as transformers_logging

    from .notebook import begin
    from .results import start_run
    from .text import FULL_MODEL, GLUE_HUB_ID
    from .xla import xla_status

    sources = {"data_dir": parameters["data_dir"] or GLUE_HUB_ID,
               "model_name": parameters["model_name"] or FULL_MODEL}
    info, hw, profile, profile_reason, out = begin(notebook, parameters["profile"], str(out), sources)
    if importlib.util.find_spec("torch_xla") is not None:  # read once, when torch_xla starts its runtime
        os.environ.setdefault("PJRT_DEVICE", "TPU" if hw.device_kind == "tpu" else "CPU")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    xla_ran, xla_reason = xla_status()
    if not info.interactive:
        datasets.disable_progress_bars()
        transformers_logging.disable_progress_bar()
    transformers_logging.set_verbosity_error()
    run = start_run(notebook, profile, info.name, "xla" if xla_ran else hw.device_kind, out, parameters=parameters)
    run.record(xla_ran=xla_ran, xla_reason=xla_reason)
    bars = tr("on") if info.interactive else tr("off ({platform}: nobody watches)").format(platform=info.name)
    report = tr("profile {profile} ({reason})\nXLA: {xla_reason}\nprogress bars: {bars}").format(
        profile=profile, reason=profile_reason, xla_reason=xla_reason, bars=bars)
    print(report)
    return FinetuneSetup(info, hw, profile, xla_ran, xla_reason, report), run


def describe_model(model, loading: dict) -> tuple[dict[str, Any], str]:
    """Size and shape of a model from `from_pretrained(..., output_loading_info=True)`: what to record, and a line.

    `newly_initialized` lists the weights the checkpoint did not have (the new classification head).
    """
    config = model.config
    facts = {"num_parameters": sum(p.numel() for p in model.parameters()),
             "newly_initialized": sorted(loading["missing_keys"]),
             "num_layers": config.num_hidden_layers, "hidden_size": config.hidden_size}
    line = tr("{model}: {layers} layers of width {width}, {millions:.1f}M parameters; newly initialised (not in "
              "the checkpoint): {new}").format(model=type(model).__name__, layers=facts["num_layers"],
                                               width=facts["hidden_size"], millions=facts["num_parameters"] / 1e6,
                                               new=facts["newly_initialized"])
    return facts, line


def logit_diff_to_alone(model, collator, sample: list, batch) -> float:
    """Max |logit difference| of `sample`'s shortest example inside `batch` against the same example alone.

    `batch` is `collator(sample)` on the model's device, with its attention mask or another one (05, step 3).
    Round-off (below 1e-4 in fp32) means the padding did not change what the model computed.
    """
    shortest = min(range(len(sample)), key=lambda i: len(sample[i]["input_ids"]))
    device = next(model.parameters()).device
    model.eval()
    with torch.no_grad():
        alone = model(**collator([sample[shortest]]).to(device)).logits[0]
        inside = model(**batch).logits[shortest]
    return (alone - inside).abs().max().item()


def forward_ms(model, batches: dict[str, Any], repeats: int = 3) -> dict:
    """Milliseconds of one no-grad forward pass on each of `batches`, alternated, after one warm-up each.

    Each pass ends with `.item()`, which waits for the device. Returns `{name: {"median", "min", "max", "n"}}`.
    """
    def forward(batch):
        def call():
            with torch.no_grad():
                return model(**batch).logits.sum().item()
        return call

    timings = interleaved_timings({name: forward(batch) for name, batch in batches.items()}, repeats=repeats)
    return {name: {k: v if k == "n" else v * 1e3 for k, v in spread(seconds).items()}
            for name, seconds in timings.items()}


def ratio_report(timed: dict, slow: str, fast: str, what: str) -> tuple[float, str]:
    """`timed[slow]`'s median over `timed[fast]`'s (milliseconds from `forward_ms`/`optimizer_step_ms`), and lines
    that show each spread and say whether the difference is resolved: when the two ranges overlap it is "not
    resolved on this machine"."""
    ratio = timed[slow]["median"] / timed[fast]["median"]
    line = tr("{what}, {name}: median {median:.1f} ms [{min:.1f}-{max:.1f}], {n} trials")
    lines = [line.format(what=what, name=name, median=ms["median"], min=ms["min"], max=ms["max"], n=ms["n"])
             for name, ms in timed.items()]
    if timed[slow]["min"] > timed[fast]["max"] or timed[slow]["max"] < timed[fast]["min"]:
        lines.append(tr("{slow} takes {ratio:.1f}x the time of {fast} here").format(slow=slow, ratio=ratio, fast=fast))
    else:
        lines.append(tr("{slow} / {fast} = {ratio:.1f}x, not resolved on this machine: the ranges overlap").format(
            slow=slow, fast=fast, ratio=ratio))
    return ratio, "\n".join(lines)


def optimizer_step_ms(model: torch.nn.Module, optimizers: dict[str, Callable], repeats: int = 3) -> dict:
    """Milliseconds per `step()` of each optimizer (`{name: make(params)}`), alternated, the first step dropped.

    They step one shared copy of `model`'s trainable weights with small random gradients, so the model itself is
    untouched. Each step ends with a read of one updated value, which waits for the device (CUDA runs ahead).
    Returns `{name: {"median", "min", "max", "n"}}` in milliseconds (notebook 05, step 4).
    """
    params = [p.detach().clone().requires_grad_(True) for p in model.parameters() if p.requires_grad]
    for p in params:
        p.grad = torch.randn_like(p) * 1e-3
    last = params[-1]

    def stepper(optimizer):
        return lambda: (optimizer.step(), last.view(-1)[0].item())

    steps = {name: stepper(make(params)) for name, make in optimizers.items()}
    timings = interleaved_timings(steps, repeats=repeats)
    return {name: {k: v if k == "n" else v * 1e3 for k, v in spread(seconds).items()}
            for name, seconds in timings.items()}


class LossLog:
    """The bookkeeping of `train_classifier` (notebook 05), so that the loop shows only the training.

    Each step's loss stays on the device; every `log_every` steps (and at the last) they are read in one transfer,
    their mean and the learning rate go to `accelerator.log`, and the window's steps, samples and seconds are kept
    (the seconds are real: the read waited for the device). A progress bar runs on the main process only.
    """

    def __init__(self, accelerator, lr_scheduler, train_dataloader, num_epochs: int, progress_bar: bool = True,
                 log_every: int = 5):
        total, self.num_epochs = num_epochs * len(train_dataloader), num_epochs
        self.accelerator, self.lr_scheduler, self.total, self.log_every = accelerator, lr_scheduler, total, log_every
        self.progress = tqdm(total=total, main_process_only=True, desc="fine-tuning",
                             disable=not progress_bar)  # off where nobody watches: it would freeze at 0%
        self.losses, self.window_steps, self.window_seconds, self.window_samples = [], [], [], []
        self.pending, self.samples, self.start = [], 0, time.perf_counter()

    def step(self, loss: torch.Tensor, batch_size: int) -> None:
        self.pending.append(loss)  # a tensor on the device: no wait, no transfer
        self.samples += batch_size * self.accelerator.num_processes
        self.progress.update(1)
        if len(self.pending) == self.log_every or len(self.losses) + len(self.pending) == self.total:
            read = torch.stack(self.pending).tolist()  # one transfer; waits for the device
            self.losses += read
            self.window_steps.append(len(read))
            self.window_seconds.append(time.perf_counter() - self.start)
            self.window_samples.append(self.samples)
            logged = {"train/loss": sum(read) / len(read),  # the window's mean
                      "train/lr": self.lr_scheduler.get_last_lr()[0]}
            self.accelerator.log(logged, step=len(self.losses))
            self.pending, self.samples, self.start = [], 0, time.perf_counter()

    def close(self) -> dict:
        self.progress.close()
        per_epoch = self.total // self.num_epochs
        return {"losses": self.losses, "last_epoch_loss": sum(self.losses[-per_epoch:]) / per_epoch,
                "window_steps": self.window_steps, "window_seconds": self.window_seconds,
                "window_samples": self.window_samples}


def train_classifier(accelerator, model, optimizer, lr_scheduler, train_dataloader, num_epochs,
                     max_grad_norm, log):
    for epoch in range(num_epochs):
        model.train()
        for batch in train_dataloader:  # (B, T) tensors, already on the device
            with accelerator.accumulate(model):  # until the last micro-batch: no sync, no step
                loss = model(**batch).loss
                accelerator.backward(loss)
                if accelerator.sync_gradients:
                    accelerator.clip_grad_norm_(model.parameters(), max_grad_norm)
                optimizer.step()
                lr_scheduler.step()
                optimizer.zero_grad()
            log.step(loss.detach(), len(batch["labels"]))  # detached: no graph kept, no device wait
    return log.close()


def throughput_after_warmup(trained: dict, device) -> tuple[dict, str]:
    """Samples/s of `train_classifier`'s windows after the first (05, step 5): what to record, and a line.

    The first window holds the warm-up (memory allocation; compiles on XLA); with one window, nothing is dropped.
    Each window's seconds are real: its losses were read from the device at its end, which waited for it.
    """
    skip = 1 if len(trained["window_steps"]) > 1 else 0
    samples, seconds = trained["window_samples"][skip:], trained["window_seconds"][skip:]
    per_window = spread([n / s for n, s in zip(samples, seconds, strict=True)])
    facts = {"warmup_steps": sum(trained["window_steps"][:skip]), "samples_per_s": sum(samples) / sum(seconds),
             "samples_per_s_per_window": per_window}
    line = tr("after {warmup} warm-up steps: {rate:.1f} samples/s on {device}; "
              "per window median {median:.1f} [{min:.1f}-{max:.1f}], {n} windows").format(
        warmup=facts["warmup_steps"], rate=facts["samples_per_s"], device=device, median=per_window["median"],
        min=per_window["min"], max=per_window["max"], n=per_window["n"])
    if getattr(device, "type", device) == "cpu":
        line += tr("\nNo T4 was measured by this run: the full profile on a T4 records its samples/s here.")
    return facts, line


def savable(accelerator, model) -> torch.nn.Module:
    """What `accelerator.save_model` can write: `model` itself, or on XLA a copy of it on the CPU (05, step 5).

    Accelerate 1.16's `save_model` reads storage pointers, which XLA tensors lack ("Attempted to access the data
    pointer on an invalid python storage"); a copy on the host saves fine.
    """
    import copy

    if accelerator.device.type != "xla":
        return model
    return copy.deepcopy(accelerator.unwrap_model(model)).to("cpu")


def pipeline_accuracy(classifier, task, batch_size: int, max_length: int) -> float:
    """Accuracy of a `text-classification` pipeline on `task.eval` (a `freegpu.text.TextTask`'s held-out texts).

    The pipeline tokenizes (sentences, or `{"text", "text_pair"}` pairs), batches, and returns label names;
    they are mapped back to ids with the model's `label2id` and scored with scikit-learn.
    """
    from .text import pipeline_inputs

    outputs = classifier(pipeline_inputs(task.eval, task.text_fields), batch_size=batch_size, truncation=True,
                         max_length=max_length)
    predicted = [classifier.model.config.label2id[output["label"]] for output in outputs]
    return accuracy_score(task.eval["label"], predicted)


def xla_compiles() -> int:
    """XLA compiles so far in this process: torch_xla's `CompileTime` metric (notebook 05, step 6)."""
    import torch_xla.debug.metrics as met

    data = met.metric_data("CompileTime")  # (count, total, samples), or None before the first compile
    return data[0] if data else 0


def count_xla_compiles(accelerator, model, optimizer, dataset, collate, max_grad_norm: float,
                       steps: int = 6) -> tuple[int, list[int]]:
    """XLA compiles so far, then the compiles added after each of `steps` training steps on one batch (05, step 6).

    The batch is all of `dataset` (one batch of the training shape), in a prepared loader, so that each step ends
    with `torch_xla.sync()`; the learning rate is held constant at its peak (the run's schedule ended at 0).
    The count is read between steps, from torch_xla's `CompileTime` metric.
    """
    from torch.utils.data import DataLoader
    from transformers import get_scheduler

    constant = get_scheduler("constant", optimizer)
    one_batch = accelerator.prepare(DataLoader(dataset, batch_size=len(dataset), collate_fn=collate))
    before, added = xla_compiles(), []
    for _ in range(steps):
        log = LossLog(accelerator, constant, one_batch, 1, progress_bar=False)
        train_classifier(accelerator, model, optimizer, constant, one_batch, 1, max_grad_norm, log)
        added.append(xla_compiles() - before)
    return before, added


def evaluate_classifier(accelerator, model, eval_dataloader):
    model.eval()  # dropout off: the same input always gives the same prediction
    predictions, references, gathered = [], [], 0
    for batch in eval_dataloader:
        with torch.no_grad():
            logits = model(**batch).logits  # (B, num_labels)
        gathered += len(accelerator.gather(batch["labels"]))  # with repeats that even out processes
        pairs = accelerator.gather_for_metrics((logits.argmax(dim=-1), batch["labels"]))  # without
        predictions += pairs[0].tolist()
        references += pairs[1].tolist()
    return {"accuracy": accuracy_score(references, predictions), "count": len(references),
            "f1": f1_score(references, predictions), "gathered": gathered}
