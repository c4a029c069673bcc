"""Check every parameter before any work starts: the cell after each notebook's `parameters` cell.

Introduced in notebook 00. Each call checks one parameter and returns it; a bad value raises `TypeError` or
`ValueError` whose message names the parameter, the value and what is allowed. Nothing here imports torch, so
the check cell runs (and fails) in well under a second.
"""

from __future__ import annotations

import json
import math
import os
import socket
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .i18n import tr

__all__ = ["RUN_MARKER", "check_choice", "check_bool", "check_int", "check_float", "check_seed", "check_fits_memory",
           "check_fits_disk", "check_fits_time", "check_output_dir", "check_source", "read_marker"]

# Written by `freegpu.results.start_run` into the output folder: which notebook owns it, and whether its run ended.
RUN_MARKER = ".freegpu-run.json"
SEED_MAX = 2**32 - 1  # numpy's seeds stop here; Accelerate's set_seed seeds numpy too

_DATA_SUFFIXES = (".parquet", ".arrow", ".csv", ".json", ".jsonl")  # what load_dataset reads from a folder


def check_choice(name: str, value: Any, allowed: Iterable[Any]) -> Any:
    """Return `value` if it is one of `allowed` (same type too: `0` is not `False`), else raise `ValueError`."""
    allowed = tuple(allowed)
    if not any(value == a and type(value) is type(a) for a in allowed):
        raise ValueError(tr("parameter {name}={value!r} is not allowed; choose one of: {allowed}").format(
            name=name, value=value, allowed=", ".join(repr(a) for a in allowed)))
    return value


def check_bool(name: str, value: Any) -> bool:
    """Return `value` if it is `True` or `False` (not `0`, `1` or `"False"`), else raise `TypeError`."""
    if not isinstance(value, bool):
        raise TypeError(tr("parameter {name}={value!r} must be True or False").format(name=name, value=value))
    return value


def _bounds(minimum: float, maximum: float) -> str:
    return f"[{minimum}, {maximum}]"


def check_int(name: str, value: Any, *, minimum: int, maximum: int) -> int:
    """Return `value` if it is an `int` (not a `bool`, not `2.0`) within `[minimum, maximum]`."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(tr("parameter {name}={value!r} must be an integer in {bounds}").format(
            name=name, value=value, bounds=_bounds(minimum, maximum)))
    if not minimum <= value <= maximum:
        raise ValueError(tr("parameter {name}={value!r} is out of range; allowed: {bounds}").format(
            name=name, value=value, bounds=_bounds(minimum, maximum)))
    return value


def check_float(name: str, value: Any, *, minimum: float, maximum: float) -> float:
    """Return `value` as a float if it is a finite number within `[minimum, maximum]` (an `int` is accepted)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(tr("parameter {name}={value!r} must be a number in {bounds}").format(
            name=name, value=value, bounds=_bounds(minimum, maximum)))
    if not math.isfinite(value) or not minimum <= value <= maximum:
        raise ValueError(tr("parameter {name}={value!r} is out of range; allowed: {bounds}").format(
            name=name, value=value, bounds=_bounds(minimum, maximum)))
    return float(value)


def check_seed(name: str, value: Any) -> int:
    """A seed: an integer in `[0, 2**32 - 1]`, the range numpy (and so `set_seed`) accepts."""
    return check_int(name, value, minimum=0, maximum=SEED_MAX)


def check_text(name: str, value: Any, *, max_length: int = 4096) -> str:
    """A `str` of at most `max_length` characters, without NUL bytes."""
    if not isinstance(value, str):
        raise TypeError(tr("parameter {name}={value!r} must be a string").format(name=name, value=value))
    if len(value) > max_length or "\0" in value:
        raise ValueError(tr("parameter {name} must be at most {max_length} characters, without NUL bytes").format(
            name=name, max_length=max_length))
    return value


def check_source(name: str, value: Any, *, hub_default: str, data: bool = True) -> str:
    """A Hub id or a local folder for the full profile's data (`data=True`) or model; empty means `hub_default`.

    A value that starts like a path (`/`, `.`, `~`) must be an existing folder; a dataset folder must hold data
    files (parquet, arrow, csv, json) as the Hub serves them; anything else is taken as a Hub id.
    """
    check_text(name, value, max_length=1024)
    path = Path(value).expanduser()
    if not value or (not path.is_dir() and not value.startswith(("/", ".", "~"))):
        return value
    what = tr("the dataset") if data else tr("the model")
    if not path.is_dir():
        raise ValueError(tr("parameter {name}={value!r}: no such folder. Give a folder that holds {what} as the Hub "
                            "serves it, or leave {name} empty for {hub_default} from the Hugging Face Hub").format(
            name=name, value=value, what=what, hub_default=hub_default))
    files = [p for p in path.rglob("*") if p.suffix in _DATA_SUFFIXES] if data else list(path.glob("config.json"))
    if not files:
        kind = tr("no .parquet, .arrow, .csv or .json files") if data else tr("no config.json")
        raise ValueError(tr("parameter {name}={value!r}: the folder holds {kind}, so it is not {what} as the Hub "
                            "serves it; leave {name} empty for {hub_default} from the Hugging Face Hub").format(
            name=name, value=value, kind=kind, what=what, hub_default=hub_default))
    return value


def check_fits_memory(name: str, value: Any, nbytes: int, *, what: str, budget_bytes: int | None = None,
                      fraction: float = 0.5) -> Any:
    """Refuse `value` when the `nbytes` it needs exceed `fraction` of `budget_bytes` (default: free RAM).

    `nbytes` is the caller's estimate for `what` (say, "activations of one batch"). Call it before allocating, so a
    too-large value fails with a message instead of an out-of-memory kill minutes later.
    """
    if budget_bytes is None:
        import psutil

        budget_bytes = psutil.virtual_memory().available
    limit = int(budget_bytes * fraction)
    if nbytes > limit:
        raise ValueError(tr("parameter {name}={value!r} needs about {need:.2f} GiB for {what}; "
                            "this machine allows {limit:.2f} GiB ({fraction:.0%} of "
                            "{budget:.2f} GiB available). Choose a smaller {name}.").format(
            name=name, value=value, need=nbytes / 1024**3, what=what, limit=limit / 1024**3, fraction=fraction,
            budget=budget_bytes / 1024**3))
    return value


def check_fits_disk(name: str, value: Any, nbytes: int, folder: Path | str, *, what: str,
                    fraction: float = 0.5) -> Any:
    """Refuse `value` when the `nbytes` it writes under `folder` exceed `fraction` of the free space there."""
    import shutil

    folder = Path(folder)
    while not folder.exists() and folder != folder.parent:  # the folder may not exist yet: measure its parent
        folder = folder.parent
    free = shutil.disk_usage(folder).free
    limit = int(free * fraction)
    if nbytes > limit:
        raise ValueError(tr("parameter {name}={value!r} needs about {need:.2f} GiB of disk for {what} "
                            "in {folder}; {fraction:.0%} of the {free:.2f} GiB free there is "
                            "{limit:.2f} GiB. Choose a smaller {name}.").format(
            name=name, value=value, need=nbytes / 1024**3, what=what, folder=folder, fraction=fraction,
            free=free / 1024**3, limit=limit / 1024**3))
    return value


def check_fits_time(name: str, value: Any, seconds: float, *, what: str, limit_s: float) -> Any:
    """Refuse `value` when the caller's estimate of the `seconds` it costs exceeds `limit_s`.

    For values that decide how long a cell runs rather than how much memory it takes (work per sample, epochs).
    """
    if seconds > limit_s:
        raise ValueError(tr("parameter {name}={value!r} would take about {seconds:,.0f} s for {what}; "
                            "this notebook allows {limit_s:,.0f} s. Choose a smaller {name}.").format(
            name=name, value=value, seconds=seconds, what=what, limit_s=limit_s))
    return value


def read_marker(folder: Path) -> dict[str, Any] | None:
    """The run marker of `folder` (see `RUN_MARKER`), or `None` when there is none or it is unreadable."""
    try:
        return json.loads((Path(folder) / RUN_MARKER).read_text())
    except (OSError, ValueError):
        return None


def _alive_elsewhere(marker: dict[str, Any]) -> bool:
    """Whether the marker's run is still going in another live process on this host."""
    pid = marker.get("pid")
    if marker.get("state") != "running" or marker.get("host") != socket.gethostname() or not isinstance(pid, int):
        return False
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _refuse(output_dir: str, path: Path, why: str) -> ValueError:
    return ValueError(tr("parameter output_dir={output_dir!r} ({path}): {why}").format(
        output_dir=output_dir, path=path, why=why))


def check_output_dir(output_dir: Any, notebook: str, info=None) -> Path:
    """Resolve `output_dir` (empty: the platform's working folder + `notebook`), create it, probe that it is writable.

    Refuses a path inside a read-only platform input folder (Kaggle's input folder), a regular file, a folder
    that another notebook's run owns or that a live run of this notebook is writing to, and a non-empty folder
    that no course run wrote (its files would be mixed with ours). It deletes nothing: `start_run` clears what an
    earlier run of the same notebook left. Returns the absolute path.
    """
    from .platform import detect_platform, platform_dirs, read_only_input

    check_text("output_dir", output_dir)
    info = info or detect_platform()
    path = Path(output_dir).expanduser() if output_dir else platform_dirs(info).working_dir / notebook
    path = path.absolute()
    locked = read_only_input(path)
    if locked is not None:
        raise _refuse(output_dir, path, tr("it is inside {locked}, which is read-only; write under the working "
                                           "folder").format(locked=locked))
    if path.exists() and not path.is_dir():
        raise _refuse(output_dir, path, tr("it is a file, not a folder"))
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path) as probe:
            probe.write(b"probe")
    except OSError as exc:
        raise _refuse(output_dir, path, tr("cannot create or write to it ({error})").format(
            error=exc.strerror or exc)) from None
    marker = read_marker(path)
    if marker is not None:
        if marker.get("notebook") != notebook:
            raise _refuse(output_dir, path, tr("it holds the run of notebook {owner!r}; give each "
                                               "notebook its own folder").format(owner=marker.get("notebook")))
        if _alive_elsewhere(marker):
            raise _refuse(output_dir, path, tr("another run of {notebook} (pid {pid}) is writing to it").format(
                notebook=notebook, pid=marker["pid"]))
    elif (path / RUN_MARKER).exists():
        raise _refuse(output_dir, path, tr("another run is claiming it right now; give each run its own folder"))
    elif any(path.iterdir()):
        names = sorted(p.name for p in path.iterdir())
        shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
        raise _refuse(output_dir, path, tr("it holds files that no course run wrote ({shown}); choose an empty or "
                                           "new folder, or leave output_dir empty for the default").format(
            shown=shown))
    return path.resolve()
