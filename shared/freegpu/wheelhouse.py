"""Install the course package where there is no internet: a folder of wheels, attached as a Kaggle dataset.

Introduced in notebook 06 (Kaggle commit workflow); `build/run_course.py` builds the course's wheelhouse with it.
Build the folder where pip can reach an index, upload it (`kaggle datasets create -p`), attach it to the
notebook, and install with `pip install --no-index --find-links <folder>`.
"""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

from packaging.requirements import Requirement

__all__ = ["project_source", "missing_requirements", "build_wheelhouse", "install_offline"]


def project_source(dist: str = "freegpu") -> Path | None:
    """The local folder `dist` was installed from (`pip install -e .` or `pip install <dir>`), or `None`."""
    try:
        raw = importlib.metadata.distribution(dist).read_text("direct_url.json")
    except importlib.metadata.PackageNotFoundError:
        return None
    url = json.loads(raw).get("url", "") if raw else ""
    return Path(url.removeprefix("file://")) if url.startswith("file://") else None


def missing_requirements(dist: str = "freegpu", extras: tuple[str, ...] = ()) -> list[str]:
    """The requirements of `dist` (with `extras`) that this environment does not satisfy: what a wheelhouse must add.

    Run it on the machine you install on (a Kaggle kernel) to see what its image lacks.
    """
    missing = []
    for line in importlib.metadata.requires(dist) or []:
        req = Requirement(line)
        if req.marker and not any(req.marker.evaluate({"extra": e}) for e in ("", *extras)):
            continue
        try:
            installed = importlib.metadata.version(req.name)
        except importlib.metadata.PackageNotFoundError:
            missing.append(str(req))
            continue
        if not req.specifier.contains(installed, prereleases=True):
            missing.append(str(req))
    return missing


def _pip(*args: str, timeout: float) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"pip {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return done


def build_wheelhouse(folder: Path, project: Path, requirements: list[str] = (), *,
                     metadata: dict | None = None, timeout: float = 600) -> list[str]:
    """Write the wheel of `project` and of `requirements` (with their dependencies) into `folder`.

    The project is built with the build backend installed here (`--no-build-isolation`: no download). Only the
    listed `requirements` are downloaded. `metadata` is written as `dataset-metadata.json`, so the folder can be
    uploaded with `kaggle datasets create -p`. Returns the wheel file names.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    project = Path(project).resolve()  # a path, never a name pip would look up on the index
    _pip("wheel", "--quiet", "--no-deps", "--no-build-isolation", "--wheel-dir", str(folder), str(project),
         timeout=timeout)
    if requirements:
        _pip("download", "--quiet", "--only-binary=:all:", "--dest", str(folder), *requirements, timeout=timeout)
    if metadata is not None:
        (folder / "dataset-metadata.json").write_text(json.dumps(metadata, indent=2) + "\n")
    return sorted(p.name for p in folder.glob("*.whl"))


def install_offline(folder: Path, requirement: str, target: Path, *, timeout: float = 600) -> str:
    """`pip install --no-index --find-links folder requirement` into `target` (a scratch folder); pip's output.

    `--isolated` ignores pip's configuration (extra indexes and find-links folders), so only `folder` is searched.
    `--no-deps`: the dependencies are the kernel's own packages (see `missing_requirements`), which pip cannot
    see from a `--target` folder. `--no-index` makes any download attempt an error instead of a hang.
    """
    done = _pip("--isolated", "install", "--no-index", "--find-links", str(folder), "--no-deps",
                "--target", str(target), requirement, timeout=timeout)
    return done.stdout
