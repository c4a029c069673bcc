"""Record what a notebook measured to `<output_dir>/results.json`, and show it as a table.

Introduced in notebook 00. Every notebook ends with a "What you measured" cell that calls `Run.save()`; the tests
read the file it writes. Each file says which notebook, profile, platform, device and library versions produced
it, so a CPU smoke number is never mistaken for a GPU result.
"""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import json
import math
import os
import platform as _pyplatform
import shutil
import socket
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .i18n import tr

__all__ = ["COMMON_KEYS", "Run", "start_run", "format_value",
           "show_table"]

LIBRARIES = ("torch", "accelerate", "transformers", "datasets", "torch_xla", "numpy", "freegpu")
COMMON_KEYS = ("notebook", "profile", "platform", "device", "versions", "parameters", "started_at", "wall_s",
               "headline")


def library_versions() -> dict[str, str | None]:
    """Installed versions of the libraries the course uses (`None` = not installed), without importing them."""
    versions: dict[str, str | None] = {"python": _pyplatform.python_version()}
    for name in LIBRARIES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item") and callable(value.item):  # numpy / torch scalars
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot write {type(value).__name__} to results.json")


def umask_mode(mode: int = 0o666) -> int:
    """`mode` less this process's umask: what `open()` would give a new file (`mkstemp` gives 0600)."""
    mask = os.umask(0)
    os.umask(mask)
    return mode & ~mask


def write_json_atomic(path: Path, data: dict[str, Any]) -> Path:
    """Write JSON to a temp file beside `path`, then rename it over `path`: readers never see half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2, default=_jsonable, allow_nan=False)
            f.write("\n")
        os.chmod(tmp, umask_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def share_outputs(folder: Path) -> None:
    """Give every file and folder under `folder` the read (and folder search) bits the user's umask allows.

    Libraries write some outputs owner-only (safetensors, `mkstemp`, `mkdtemp`: mode 0600/0700); a course output
    folder is for others to read too, as the files `open()` creates are. Nothing is made writable or executable.
    """
    read, search = umask_mode(0o444), umask_mode(0o111)
    for path in [Path(folder), *Path(folder).rglob("*")]:
        if path.is_symlink():
            continue
        mode = path.stat().st_mode
        wanted = mode | read | (search if path.is_dir() else 0)
        if wanted != mode:
            os.chmod(path, wanted)


def format_value(value: Any) -> str:
    """A measured value as short text: floats to 4 significant digits, dicts and lists on one line."""
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.4g}"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {format_value(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(format_value(v) for v in value)
    return str(value)


def markdown_table(values: dict[str, Any]) -> str:
    """A two-column markdown table (`measure`, `value`) of `values`."""
    cells = {key: format_value(value).replace("|", "\\|").replace("\n", " ") for key, value in values.items()}
    rows = "\n".join(f"| `{key}` | {cell} |" for key, cell in cells.items())
    return tr("| measure | value |") + f"\n|---|---|\n{rows}"


def show_table(values: dict[str, Any]) -> None:
    """Display `values` as a markdown table: rendered in Jupyter, the same text in logs and outside IPython."""
    table = markdown_table(values) if values else tr("(nothing to show)")
    try:
        from IPython.display import display
    except ImportError:
        print(table)
        return
    display({"text/markdown": table, "text/plain": table}, raw=True)


@dataclass
class Run:
    """The record of one notebook run; create it with `start_run`."""

    notebook: str
    profile: str
    platform: str
    device: str
    output_dir: Path
    parameters: dict[str, Any] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)
    headline: list[str] = field(default_factory=list)
    _t0: float = field(default_factory=time.perf_counter, repr=False)
    _started: str = field(default_factory=lambda: dt.datetime.now(dt.UTC).isoformat(timespec="seconds"))

    def record(self, **values: Any) -> None:
        """Add measured values (numbers, strings, lists, dicts); later calls overwrite earlier keys."""
        clash = set(values) & set(COMMON_KEYS)
        if clash:
            raise ValueError(f"{sorted(clash)} are written by Run itself; pick other names")
        self.values.update(values)

    def highlight(self, *keys: str) -> None:
        """Name the recorded values the course site shows for this notebook (all are saved either way)."""
        missing = [key for key in keys if key not in self.values]
        if missing:
            raise KeyError(f"record {missing} before highlighting them")
        self.headline = list(keys)

    def as_dict(self) -> dict[str, Any]:
        common = {"notebook": self.notebook, "profile": self.profile, "platform": self.platform,
                  "device": self.device, "versions": library_versions(), "parameters": self.parameters,
                  "started_at": self._started,
                  "wall_s": round(time.perf_counter() - self._t0, 2), "headline": self.headline}
        torch = sys.modules.get("torch")  # only a run that used CUDA has a CUDA peak; never initialise it here
        if torch is not None and torch.cuda.is_initialized():
            common["cuda_max_memory_allocated_bytes"] = torch.cuda.max_memory_allocated()
        return {**common, **self.values}

    def save(self) -> Path:
        """Write `results.json` into `output_dir` (atomically), then mark the run complete; return the path.

        `results.json` is the last file a run writes: a folder whose marker still says "running" was left by a run
        that died, and the next `start_run` clears it. Everything in the folder is made readable first (see
        `share_outputs`).
        """
        from .checks import read_marker

        marker = read_marker(self.output_dir) or {}
        if (marker.get("pid"), marker.get("started_at"), marker.get("notebook")) != (os.getpid(), self._started,
                                                                                     self.notebook):
            raise RuntimeError(tr("{output_dir} was claimed by another run since this one started "
                                  "({notebook!r}, pid {pid}); results.json not written. "
                                  "Give each run its own output_dir.").format(
                output_dir=self.output_dir, notebook=marker.get("notebook"), pid=marker.get("pid")))
        share_outputs(self.output_dir)
        path = write_json_atomic(self.output_dir / "results.json", self.as_dict())
        _write_marker(self.output_dir, self.notebook, "complete", self._started)
        return path

    def show(self, everything: bool = False) -> None:
        """Display the headline values (`highlight`) as a table, rendered in Jupyter, plain text in logs.

        With nothing highlighted, or `everything=True`, every recorded value is shown; all are in results.json.
        """
        keys = self.values if everything or not self.headline else self.headline
        show_table({key: self.values[key] for key in keys})


def _write_marker(folder: Path, notebook: str, state: str, started_at: str) -> None:
    from .checks import RUN_MARKER

    write_json_atomic(Path(folder) / RUN_MARKER, {"notebook": notebook, "state": state, "pid": os.getpid(),
                                                 "host": socket.gethostname(), "started_at": started_at})


def start_run(notebook: str, profile: str, platform: str, device: str, output_dir: Path,
              parameters: dict[str, Any] | None = None) -> Run:
    """Claim `output_dir` for this run and start the clock; `wall_s` counts from here (introduced in notebook 00).

    `output_dir` must have passed `freegpu.checks.check_output_dir`. What an earlier run of this notebook left there
    is deleted, and the folder is marked "running" until `Run.save()` writes `results.json`: a folder never mixes
    two runs. `parameters` (the notebook's parameters cell) are saved with the results.
    """
    from .checks import RUN_MARKER, read_marker

    output_dir = Path(output_dir)
    marker = read_marker(output_dir)
    if marker is not None and marker.get("notebook") != notebook:
        raise ValueError(tr("{output_dir} belongs to notebook {notebook!r}; check_output_dir refuses it").format(
            output_dir=output_dir, notebook=marker.get("notebook")))
    if marker is None and (output_dir / RUN_MARKER).exists():
        raise ValueError(tr("{output_dir} was claimed by another run a moment ago; give each run its own "
                            "output_dir").format(output_dir=output_dir))
    if marker is None and any(output_dir.iterdir()):
        raise ValueError(tr("{output_dir} holds files that no course run wrote; check_output_dir refuses it").format(
            output_dir=output_dir))
    run = Run(notebook=notebook, profile=profile, platform=platform, device=device, output_dir=output_dir,
              parameters=dict(parameters or {}))
    if marker is None:  # claim the empty folder: of two runs starting at once, exactly one creates the marker
        try:
            os.close(os.open(output_dir / RUN_MARKER, os.O_CREAT | os.O_EXCL | os.O_WRONLY, umask_mode()))
        except FileExistsError:
            raise ValueError(tr("{output_dir} was claimed by another run a moment ago; give each run its own "
                            "output_dir").format(output_dir=output_dir)) from None
    _write_marker(output_dir, notebook, "running", run._started)
    for entry in output_dir.iterdir():  # the previous run of this notebook, complete or killed
        if entry.name != RUN_MARKER:
            shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
    return run
