"""The fine-tuning loop and the evaluation taught in notebook 05, for the tests and the notebooks that reuse them.

Importing this module imports torch and Accelerate. `tests/test_05_bert_finetune.py` checks that
`train_classifier` and `evaluate_classifier` are, character for character, the ones notebook 05 writes out.
`JsonlTracker` gives `accelerator.log` somewhere to write where TensorBoard is not installed.
`optimizer_step_ms` times one `step()` of several optimizers on a copy of a model's weights (05's step 4).
`LossLog` is the loop's bookkeeping (losses read from the device once per window, logged, timed).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import torch
from accelerate.tracking import GeneralTracker
from accelerate.utils import is_tensorboard_available, tqdm
from sklearn.metrics import accuracy_score, f1_score

from .measure import interleaved_timings, spread

__all__ = ["pick_trackers", "optimizer_step_ms", "LossLog", "train_classifier", "throughput_after_warmup",
           "evaluate_classifier", "xla_compiles"]


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
        return trackers, f"TensorBoard (installed) and {trackers[0].path.name}"
    return trackers, f"{trackers[0].path.name} only: TensorBoard is not installed here (pip install tensorboard)"


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

    def __init__(self, accelerator, lr_scheduler, train_dataloader, num_epochs: int, log_every: int = 5,
                 progress_bar: bool = True):
        total = num_epochs * len(train_dataloader)
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
        return {"losses": self.losses, "window_steps": self.window_steps, "window_seconds": self.window_seconds,
                "window_samples": self.window_samples}


def train_classifier(accelerator, model, optimizer, lr_scheduler, train_dataloader, num_epochs,
                     max_grad_norm, log_every=5, progress_bar=True):
    log = LossLog(accelerator, lr_scheduler, train_dataloader, num_epochs, log_every, progress_bar)
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


def throughput_after_warmup(trained: dict) -> tuple[int, float, dict]:
    """`(warm-up steps, samples/s, per-window spread)` of `train_classifier`'s windows after the first (05, step 5).

    The first window holds the warm-up (memory allocation; compiles on XLA); with one window, nothing is dropped.
    """
    skip = 1 if len(trained["window_steps"]) > 1 else 0
    samples, seconds = trained["window_samples"][skip:], trained["window_seconds"][skip:]
    per_window = spread([n / s for n, s in zip(samples, seconds, strict=True)])
    return sum(trained["window_steps"][:skip]), sum(samples) / sum(seconds), per_window


def xla_compiles() -> int:
    """XLA compiles so far in this process: torch_xla's `CompileTime` metric (notebook 05, step 6)."""
    import torch_xla.debug.metrics as met

    data = met.metric_data("CompileTime")  # (count, total, samples), or None before the first compile
    return data[0] if data else 0


def evaluate_classifier(accelerator, model, eval_dataloader):
    model.eval()  # dropout off: the same input always gives the same prediction
    predictions, references, gathered = [], [], 0
    for batch in eval_dataloader:
        with torch.no_grad():
            logits = model(**batch).logits  # (B, num_labels)
        batch_predictions, labels = logits.argmax(dim=-1), batch["labels"]
        gathered += len(accelerator.gather(labels))  # with the repeats that evened out the batches
        batch_predictions, labels = accelerator.gather_for_metrics(
            (batch_predictions, labels))  # without them
        predictions.append(batch_predictions.cpu())
        references.append(labels.cpu())
    predictions, references = torch.cat(predictions).numpy(), torch.cat(references).numpy()
    return {"accuracy": accuracy_score(references, predictions),
            "f1": f1_score(references, predictions), "count": len(references), "gathered": gathered}
