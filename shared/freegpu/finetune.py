"""The fine-tuning loop and the evaluation taught in notebook 05, for the tests and the notebooks that reuse them.

Importing this module imports torch and Accelerate. `tests/test_05_bert_finetune.py` checks that
`train_classifier` and `evaluate_classifier` are, character for character, the ones notebook 05 writes out.
`JsonlTracker` gives `accelerator.log` somewhere to write where TensorBoard is not installed.
`optimizer_step_ms` times one `step()` of several optimizers on a copy of a model's weights (05's step 4).
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

__all__ = ["pick_trackers", "optimizer_step_ms", "train_classifier", "evaluate_classifier"]


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


def train_classifier(accelerator, model, optimizer, lr_scheduler, train_dataloader, num_epochs,
                     max_grad_norm, log_every=5, progress_bar=True):
    total = num_epochs * len(train_dataloader)
    progress = tqdm(total=total, main_process_only=True, desc="fine-tuning",
                    disable=not progress_bar)  # off where nobody watches: it would freeze at 0%
    losses, window_steps, window_seconds, window_samples = [], [], [], []
    pending, samples, start = [], 0, time.perf_counter()
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
            pending.append(loss.detach())  # stays on the device: no wait, no transfer
            samples += len(batch["labels"]) * accelerator.num_processes
            progress.update(1)
            if len(pending) == log_every or len(losses) + len(pending) == total:
                read = torch.stack(pending).tolist()  # one transfer; waits for the device
                losses += read
                window_steps.append(len(read))
                window_seconds.append(time.perf_counter() - start)  # real: the device has finished
                window_samples.append(samples)
                logged = {"train/loss": sum(read) / len(read),  # the window's mean
                          "train/lr": lr_scheduler.get_last_lr()[0]}
                accelerator.log(logged, step=len(losses))
                pending, samples, start = [], 0, time.perf_counter()
    progress.close()
    return {"losses": losses, "window_steps": window_steps, "window_seconds": window_seconds,
            "window_samples": window_samples}


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
