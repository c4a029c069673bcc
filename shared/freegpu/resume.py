"""Training that stops and resumes with nothing lost: atomic checkpoints, a time budget, an output budget.

Introduced in notebook 06 (Kaggle commit workflow), which first shows `accelerator.save_state` / `load_state`
themselves and then writes its training script with them; `save_checkpoint` is, character for character, the
function that script defines (a test checks). Works in one process or several (every process
calls `save_checkpoint`; only the main one creates, renames and deletes folders).
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from .i18n import tr

__all__ = ["list_checkpoints", "latest_checkpoint", "attached_checkpoints", "save_checkpoint",
           "dir_bytes", "check_save_fits", "plan_epochs", "collected_warnings", "kill_at", "run_script",
           "run_together", "max_weight_diff", "attach_output", "step_timing", "error_of"]

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
        return tr("the save needs {save_bytes:,} bytes and the disk has {free:,} free").format(save_bytes=save_bytes,
                                                                                                free=free)
    if budget_bytes is not None and used + save_bytes > budget_bytes:
        return tr("{used:,} bytes already used + {save_bytes:,} for the save = {total:,}, over the output budget "
                  "of {budget_bytes:,} bytes").format(used=used, save_bytes=save_bytes, total=used + save_bytes,
                                                      budget_bytes=budget_bytes)
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


# ---------------------------------------------------------------- the rehearsals of notebook 06

@contextmanager
def collected_warnings(logger: str = "accelerate.accelerator") -> Iterator[list[str]]:
    """Collect what `logger` says inside the block into a list, instead of printing it (in red, in a notebook).

    Accelerate's automatic naming says "Deleting N checkpoints to make room" at each rotation: notebook 06 counts
    those messages and says them once.
    """
    messages: list[str] = []
    log = logging.getLogger(logger)
    handler = logging.Handler()
    handler.emit = lambda record: messages.append(record.getMessage())
    log.addHandler(handler)
    propagate, log.propagate = log.propagate, False
    try:
        yield messages
    finally:
        log.removeHandler(handler)
        log.propagate = propagate


def error_of(call: Callable[[], object], inside: Path | str | None = None) -> str | None:
    """Run `call`; return the error it raises as `Type: first line` (paths inside `inside` made relative), or
    `None` if it raises nothing. Notebook 06 shows what a resumed run meets with it."""
    try:
        call()
    except Exception as error:
        message = str(error).splitlines()[0] if str(error) else ""
        if inside is not None:
            message = message.replace(f"{Path(inside)}/", "")
        return f"{type(error).__name__}: {message[:160]}"
    return None


def kill_at(event: str, step: int) -> Callable[[dict], bool]:
    """A `kill_when` for `run_script`: true at the first report of `event` at `step` or later."""
    return lambda report: report["event"] == event and report["step"] >= step


def _arguments(command: str, env: dict[str, str]) -> list[str]:
    """`command` as a shell would split it: `python` is this interpreter, `$NAME` is `env[NAME]`."""
    args = [re.sub(r"\$(\w+)", lambda m: env[m.group(1)], arg) for arg in shlex.split(command)]
    return [sys.executable, *args[1:]] if args and args[0] == "python" else args


def run_script(command: str, cwd: Path | str, env: dict[str, str] | None = None,
               kill_when: Callable[[dict], bool] | None = None, *, show: bool = True) -> tuple[list[dict], int]:
    """Run `command` (as a learner types it) in `cwd`; return its reports and its exit status.

    The script prints one `REPORT {json}` line per event (step, saved, resumed, ...); each report gains
    `since_launch_s`, the seconds from the launch (the start-up before the first step included). With `kill_when`,
    the process group gets SIGKILL at the first report for which it is true: no warning, no cleanup, as at a
    session limit; the rest of what it printed still counts. A run without `--resume_from` starts from an empty
    `--output_dir`. The script runs under `freegpu.launch`'s guard (it ends with the kernel); its stderr goes to
    `<output_dir>.log`, and a run that was not killed must exit 0. The command is printed first, after `$ `.
    """
    from .launch import launched

    if show:
        print(f"$ {command}", flush=True)
    cwd = Path(cwd)
    args = _arguments(command, env or {})
    run_dir = cwd / args[args.index("--output_dir") + 1]
    if "--resume_from" not in args:
        shutil.rmtree(run_dir, ignore_errors=True)  # a fresh run: no checkpoints of an earlier one
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    reports: list[dict] = []
    started, killed = time.monotonic(), False
    with open(f"{run_dir}.log", "w") as log, launched(args, cwd=cwd, stdout=subprocess.PIPE, stderr=log) as proc:
        for line in proc.stdout:
            if not line.startswith("REPORT "):
                continue
            reports.append(json.loads(line[len("REPORT "):]))
            reports[-1]["since_launch_s"] = reports[-1]["t"] - started  # one monotonic clock (Linux)
            if kill_when is not None and not killed and kill_when(reports[-1]):
                os.killpg(proc.pid, signal.SIGKILL)
                killed = True
        code = proc.wait()
    if kill_when is None and code != 0:
        raise RuntimeError(f"{args[1]} exited with {code}; see {run_dir.name}.log in {run_dir.parent.name}")
    return reports, code


def run_together(cwd: Path | str, env: dict[str, str] | None,
                 runs: list[tuple[str, Callable[[dict], bool] | None]]) -> list[tuple[list[dict], int]]:
    """`run_script(command, cwd, env, kill_when)` for each `(command, kill_when)` of `runs`, all started at once."""
    for command, _ in runs:
        print(f"$ {command}", flush=True)
    with ThreadPoolExecutor(len(runs)) as pool:
        futures = [pool.submit(run_script, command, cwd, env, kill_when, show=False) for command, kill_when in runs]
        return [future.result() for future in futures]


def max_weight_diff(run_a: Path | str, run_b: Path | str) -> float:
    """The largest |difference| between the final weights (`final/model.safetensors`) of two runs."""
    from safetensors.torch import load_file

    a, b = (load_file(Path(run) / "final" / "model.safetensors") for run in (run_a, run_b))
    return max((a[name] - b[name]).abs().max().item() for name in a)


def attach_output(working_dir: Path | str, attached_as: Path | str) -> Path:
    """Rehearse the next Kaggle version: the output (`working_dir`) becomes an input, the working folder empty.

    Kaggle keeps a version's working folder as its output; attached to the next version, it appears read-only
    under the input folder (`attached_as`, `<input>/<slug>`), and the next version starts with nothing in its
    working folder.
    """
    attached_as = Path(attached_as)
    shutil.rmtree(attached_as, ignore_errors=True)
    shutil.copytree(working_dir, attached_as)
    shutil.rmtree(working_dir)
    Path(working_dir).mkdir(parents=True)
    return attached_as


def step_timing(runs: list[list[dict]], steps_per_epoch: int, checkpointing_steps: int) -> dict:
    """Start-up, step, save and epoch times from the reports of `runs` (the first one uninterrupted).

    `setup_s`: for each run, the seconds from its launch to its first step (imports, data, `prepare`). The step
    and save times are the medians of the first run's intervals between steps and its saves; `epoch_s` is
    `steps_per_epoch` steps plus one save every `checkpointing_steps` steps.
    """
    setup_s = [next(r["since_launch_s"] for r in reports if r["event"] == "step") for reports in runs]
    step_t = [r["t"] for r in runs[0] if r["event"] == "step"]
    step_s = statistics.median(b - a for a, b in zip(step_t, step_t[1:], strict=False))
    save_s = statistics.median(r["save_s"] for r in runs[0] if r["event"] == "saved")
    epoch_s = step_s * steps_per_epoch + save_s * steps_per_epoch / checkpointing_steps
    return {"setup_s": setup_s, "median_setup_s": statistics.median(setup_s), "median_step_ms": 1000 * step_s,
            "median_save_ms": 1000 * save_s, "epoch_s": epoch_s}
