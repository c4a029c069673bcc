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
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["COMMON_KEYS", "Run", "start_run", "library_versions", "write_json_atomic", "format_value",
           "show_table"]

LIBRARIES = ("torch", "accelerate", "transformers", "datasets", "torch_xla", "numpy", "freegpu")
COMMON_KEYS = ("notebook", "profile", "platform", "device", "versions", "started_at", "wall_s", "headline")


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


def write_json_atomic(path: Path, data: dict[str, Any]) -> Path:
    """Write JSON to a temp file beside `path`, then rename it over `path`: readers never see half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2, default=_jsonable, allow_nan=False)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


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
    return f"| measure | value |\n|---|---|\n{rows}"


def show_table(values: dict[str, Any]) -> None:
    """Display `values` as a markdown table: rendered in Jupyter, the same text in logs and outside IPython."""
    table = markdown_table(values) if values else "(nothing to show)"
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
    values: dict[str, Any] = field(default_factory=dict)
    headline: list[str] = field(default_factory=list)
    _t0: float = field(default_factory=time.perf_counter, repr=False)
    _started: str = field(default_factory=lambda: dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))

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
                  "device": self.device, "versions": library_versions(), "started_at": self._started,
                  "wall_s": round(time.perf_counter() - self._t0, 2), "headline": self.headline}
        return {**common, **self.values}

    def save(self) -> Path:
        """Write `results.json` into `output_dir` (atomically) and return its path."""
        return write_json_atomic(self.output_dir / "results.json", self.as_dict())

    def show(self) -> None:
        """Display the measured values as a table (rendered in Jupyter, plain text in logs)."""
        show_table(self.values)


def start_run(notebook: str, profile: str, platform: str, device: str, output_dir: Path) -> Run:
    """Start the clock for a notebook run; its `wall_s` counts from here (introduced in notebook 00)."""
    return Run(notebook=notebook, profile=profile, platform=platform, device=device, output_dir=Path(output_dir))
