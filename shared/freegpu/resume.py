"""Training that stops and resumes with nothing lost: atomic checkpoints, a time budget, an output budget.

Introduced in notebook 06 (Kaggle commit workflow), which first shows `accelerator.save_state` / `load_state`
themselves and then writes its training script with them; `save_checkpoint` is, character for character, the
function that script defines (a test checks). Works in one process or several (every process
calls `save_checkpoint`; only the main one creates, renames and deletes folders).
"""

from __future__ import annotations

import math
import os
import re
import shutil
import time
from pathlib import Path

__all__ = ["checkpoint_step", "list_checkpoints", "latest_checkpoint", "attached_checkpoints", "save_checkpoint",
           "TimeBudget", "dir_bytes", "check_save_fits", "plan_epochs"]

_NAME = re.compile(r"step_(\d+)")


def checkpoint_step(path: Path | str) -> int | None:
    """The training step a checkpoint folder `step_<N>` was saved at; `None` for any other name (temp folders)."""
    match = _NAME.fullmatch(Path(path).name)
    return int(match.group(1)) if match else None


def list_checkpoints(folder: Path | str) -> list[Path]:
    """The published checkpoints in `folder`, oldest first; folders still being written (`.step_N.tmp`) are skipped."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    found = [p for p in folder.iterdir() if p.is_dir() and checkpoint_step(p) is not None]
    return sorted(found, key=checkpoint_step)


def latest_checkpoint(*folders: Path | str) -> Path | None:
    """The checkpoint with the highest step across `folders` (say, this run's and a previous version's), or `None`."""
    found = [p for folder in folders for p in list_checkpoints(folder)]
    return max(found, key=checkpoint_step) if found else None


def attached_checkpoints(input_dir: Path | str, run: str) -> list[Path]:
    """The `<input_dir>/<source>/<run>/checkpoints` folders: what earlier versions left, attached as inputs.

    On Kaggle, the output of an earlier version attached to this one appears, read-only, under the input folder.
    """
    return sorted(Path(input_dir).glob(f"*/{run}/checkpoints"))


def save_checkpoint(accelerator, folder, step, total_limit, written=None):
    """Save into `folder/.step_<step>.tmp`, then rename it to `folder/step_<step>`; return that.

    A kill at any moment leaves no `step_<step>` or a complete one. Older checkpoints beyond
    `total_limit` are deleted only after the new one is published. `written(tmp)` runs between
    the writing and the rename. Every process calls this; the main one renames and deletes.
    """
    folder = Path(folder)
    target, tmp = folder / f"step_{step}", folder / f".step_{step}.tmp"
    if accelerator.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)  # left by a run killed while saving
        tmp.mkdir(parents=True)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(tmp))  # weights, optimizer, RNG states; every process takes part
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        if written is not None:
            written(tmp)
        shutil.rmtree(target, ignore_errors=True)
        os.replace(tmp, target)  # one rename on one file system: atomic
        for old in list_checkpoints(folder)[:-total_limit]:
            shutil.rmtree(old)  # only now, after the new one is published
    accelerator.wait_for_everyone()
    return target


class TimeBudget:
    """Seconds this process may still train; `stop_now` says when one more step and a save would not fit.

    Kaggle ends a session at a hard limit without warning: give the training script the time that is left, minus a
    margin, and let it save and exit cleanly instead of being cut off.
    """

    def __init__(self, seconds: float):
        self.seconds, self._start = seconds, time.monotonic()
        self.slowest_step_s = self.slowest_save_s = 0.0

    def remaining(self) -> float:
        return self.seconds - (time.monotonic() - self._start)

    def timed_step(self, seconds: float) -> None:
        self.slowest_step_s = max(self.slowest_step_s, seconds)

    def timed_save(self, seconds: float) -> None:
        self.slowest_save_s = max(self.slowest_save_s, seconds)

    def stop_now(self) -> bool:
        """Whether the slowest step seen plus the slowest save seen would run past the budget."""
        return self.remaining() < self.slowest_step_s + self.slowest_save_s


def dir_bytes(path: Path | str) -> int:
    """Bytes of all regular files under `path` (links not followed): what a Kaggle version would keep of it."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            file = Path(root) / name
            if not file.is_symlink():
                total += file.stat().st_size
    return total


def check_save_fits(output_dir: Path | str, save_bytes: int, budget_bytes: int | None) -> str | None:
    """Why a save of `save_bytes` into `output_dir` must not start, or `None` if it fits.

    `budget_bytes` is the platform's cap on the output folder (Kaggle: 20 GB for the working folder); `None` means
    no cap, and then only the free disk space counts.
    """
    used = dir_bytes(output_dir)
    free = shutil.disk_usage(output_dir).free
    if save_bytes > free:
        return f"the save needs {save_bytes:,} bytes and the disk has {free:,} free"
    if budget_bytes is not None and used + save_bytes > budget_bytes:
        return (f"{used:,} bytes already used + {save_bytes:,} for the save = {used + save_bytes:,}, "
                f"over the output budget of {budget_bytes:,} bytes")
    return None


def plan_epochs(epoch_s: float, setup_s: float, session_s: float, weekly_quota_s: float,
                session_margin: float = 0.1, week_share: float = 0.3) -> dict[str, int]:
    """How many epochs fit in one session, and in the share of the weekly quota planned for new runs.

    `epoch_s` and `setup_s` are measured (an epoch with its checkpoints, the start-up before the first step).
    `session_margin` of every session is kept for the final save and slow steps; only `week_share` of the quota is
    planned, the rest is left for reruns.
    """
    per_session = max(0, math.floor((session_s * (1 - session_margin) - setup_s) / epoch_s))
    planned_s = weekly_quota_s * week_share
    sessions = math.ceil(planned_s / session_s)
    per_week = max(0, math.floor((planned_s * (1 - session_margin) - sessions * setup_s) / epoch_s))
    return {"epochs_per_session": per_session, "sessions_per_week": sessions, "epochs_per_week": per_week}
