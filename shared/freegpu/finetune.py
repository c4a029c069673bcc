"""Where notebook 05's `accelerator.log(...)` writes: TensorBoard where installed, always a JSON-lines file.

The loop, its logging, the evaluation and the XLA save are cells of notebook 05. `JsonlTracker` gives
`accelerator.log` somewhere to write where TensorBoard is not installed.
"""

from __future__ import annotations

import json
from pathlib import Path

from accelerate.tracking import GeneralTracker
from accelerate.utils import is_tensorboard_available

from .i18n import tr

__all__ = ["pick_trackers"]


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
