"""The course's wheelhouse: a folder of wheels that installs freegpu where there is no internet (a Kaggle dataset).

`make course` builds it (build/kaggle_bundles.py `write_course_bundles`), `build/image_lane.py` builds one per
image lane. Build the folder where pip can reach an index, upload it (`kaggle datasets create -p`), attach it to
the notebook, and install with `pip install --no-index --find-links <folder>` (notebook 06 shows those lines).

`build_image_wheelhouse` builds the folder for one platform image (versions in the repository's
`platforms/images.toml`): the course's wheel, plus every wheel that the course's requirements need and the image
lacks (missing, or too old), for the image's Python, never torch (the image has its own).
"""

from __future__ import annotations

import hashlib
import json
import platform
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path

from packaging.markers import default_environment
from packaging.metadata import parse_email
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

__all__ = ["ImageVersions", "load_images", "load_image", "image_closure",
           "build_image_wheelhouse", "WheelhouseError"]

# Never put into a wheelhouse: the image has its own build of these (CUDA or TPU), and a wheel would be GBs.
NEVER_DOWNLOAD = frozenset({"torch", "torch-xla", "libtpu"})
# Where Kaggle's and Colab's images run: the tags binary wheels must carry (pip expands manylinux2014 to the
# older manylinux2010/manylinux1 tags; Ubuntu 22.04's glibc 2.35 runs all of them).
IMAGE_PLATFORMS = ("manylinux2014_x86_64",)


class WheelhouseError(RuntimeError):
    """A wheelhouse that cannot be built as asked: a requirement the image's torch fails, a conflict, no wheel."""


def _pip(*args: str, timeout: float) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"pip {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return done


def _build_project_wheel(folder: Path, project: Path, timeout: float) -> Path:
    """The wheel of `project`, built with the build backend installed here (`--no-build-isolation`: no download)."""
    project = Path(project).resolve()  # a path, never a name pip would look up on the index
    before = set(folder.glob("*.whl"))
    _pip("wheel", "--quiet", "--no-deps", "--no-build-isolation", "--wheel-dir", str(folder), str(project),
         timeout=timeout)
    built = sorted(set(folder.glob("*.whl")) - before) or sorted(folder.glob("*.whl"))
    return built[-1]


# ---------------------------------------------------------------- platform images (platforms/images.toml)

@dataclass(frozen=True)
class ImageVersions:
    """One platform image of `platforms/images.toml`: its Python, where the versions were read, its packages.

    `packages` maps canonical pip names to exact versions. `lane` names the test lane that rebuilds it ("" for
    data-only images, the TPU ones). `absent`: the course's requirements the image's freeze does not list (read
    off the same source), so a requirement the data says nothing of is an error, not taken for absent.
    """

    name: str
    title: str
    python: str
    source: str
    commit: str
    commit_date: str
    read_on: str
    inferred: str
    packages: dict[str, str]
    lane: str = ""
    os: str = ""
    absent: tuple[str, ...] = ()

    @property
    def python_minor(self) -> str:
        """`3.12` for Python 3.12.13: what `pip download --python-version` takes."""
        return ".".join(self.python.split(".")[:2])


_REQUIRED_FIELDS = ("title", "python", "source", "commit", "commit_date", "read_on", "inferred", "packages")


def load_images(path: Path) -> dict[str, ImageVersions]:
    """Every image in `path` (`platforms/images.toml`), checked: required fields, exact versions, a torch."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"no image versions at {path}: it is platforms/images.toml of the course "
                                "repository") from None
    images = {}
    for name, entry in data.get("images", {}).items():
        missing = [f for f in _REQUIRED_FIELDS if f not in entry]
        if missing:
            raise ValueError(f"{path}: image {name!r} lacks {', '.join(missing)}")
        packages = {}
        for pkg, version in entry["packages"].items():
            try:
                Version(version)
            except (InvalidVersion, TypeError):
                raise ValueError(f"{path}: image {name!r}: {pkg} = {version!r} is not an exact version") from None
            packages[canonicalize_name(pkg)] = version
        if "torch" not in packages:
            raise ValueError(f"{path}: image {name!r} names no torch version")
        absent = tuple(canonicalize_name(pkg) for pkg in entry.get("absent", ()))
        both = sorted(set(absent) & set(packages))
        if both:
            raise ValueError(f"{path}: image {name!r} lists {', '.join(both)} as absent and with a version")
        images[name] = ImageVersions(name=name, packages=packages, absent=absent,
                                     **{k: v for k, v in entry.items() if k not in ("packages", "absent")})
    if not images:
        raise ValueError(f"{path} has no [images.<name>] tables")
    return images


def load_image(path: Path, name: str) -> ImageVersions:
    """The image `name` of `path` (`platforms/images.toml`); a clear error naming the known ones otherwise."""
    images = load_images(path)
    if name not in images:
        raise KeyError(f"no image {name!r} in {path}; known: {', '.join(sorted(images))}")
    return images[name]


# ---------------------------------------------------------------- the wheelhouse an image needs

def target_environment(python_version: str | None = None, python_full_version: str | None = None) -> dict:
    """The marker environment (PEP 508) of a Linux x86_64 CPython `python_version` (`3.12`); `None`: this one."""
    env = default_environment()
    if python_version is None or python_version == ".".join(platform.python_version_tuple()[:2]):
        return env
    major, minor = python_version.split(".")[:2]
    return {**env, "python_version": f"{major}.{minor}",
            "python_full_version": python_full_version or f"{major}.{minor}.0", "implementation_name": "cpython",
            "platform_python_implementation": "CPython", "sys_platform": "linux", "platform_system": "Linux",
            "platform_machine": "x86_64", "os_name": "posix"}


@dataclass
class WheelEntry:
    """One wheel of a wheelhouse, and why it is there."""

    file: str
    name: str
    version: str
    bytes: int
    sha256: str
    why: list[str] = field(default_factory=list)


def _requires_dist(wheel: Path) -> list[Requirement]:
    with zipfile.ZipFile(wheel) as archive:
        names = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1]
        if len(names) != 1:
            raise WheelhouseError(f"{wheel.name} has {len(names)} .dist-info/METADATA files, not 1")
        raw, _ = parse_email(archive.read(names[0]))
    return [Requirement(line) for line in raw.get("requires_dist", [])]


def _entry(wheel: Path) -> WheelEntry:
    name, version, _, _ = parse_wheel_filename(wheel.name)
    return WheelEntry(wheel.name, str(name), str(version), wheel.stat().st_size,
                      hashlib.sha256(wheel.read_bytes()).hexdigest())


def _download(requirement: str, dest: Path, python_version: str | None, platforms: tuple[str, ...],
              timeout: float) -> Path:
    """One wheel, no dependencies (`pip download --no-deps --only-binary=:all:`), for another Python if asked."""
    with tempfile.TemporaryDirectory() as scratch:
        args = ["download", "--quiet", "--no-deps", "--only-binary=:all:", "--dest", scratch]
        if python_version is not None:
            args += ["--python-version", python_version, "--implementation", "cp"]
            for tag in platforms:
                args += ["--platform", tag]
        try:
            _pip(*args, requirement, timeout=timeout)
        except RuntimeError as exc:
            raise WheelhouseError(f"no wheel of {requirement} for Python {python_version or 'here'}: {exc}") from None
        [wheel] = Path(scratch).glob("*.whl")
        dest.mkdir(parents=True, exist_ok=True)
        return Path(shutil.move(str(wheel), dest / wheel.name))


def image_closure(requirements: list[Requirement], extras: tuple[str, ...], image: ImageVersions, dest: Path, *,
                  python_version: str | None = None, platforms: tuple[str, ...] = IMAGE_PLATFORMS,
                  timeout: float = 600) -> tuple[list[WheelEntry], dict[str, str]]:
    """Download into `dest` what `requirements` (with `extras`) need and `image` lacks, dependencies included.

    A requirement the image's version satisfies stops there (the image's packages already have their own
    dependencies). Any other is downloaded (the newest wheel that satisfies every requirement met so far on that
    name) and its own requirements followed in turn, markers evaluated for `python_version` on Linux x86_64.
    Torch and its XLA/TPU companions are never downloaded: the image's must satisfy the requirement.
    Returns the downloaded wheels and the image's packages that satisfied a requirement.
    """
    env = target_environment(python_version, image.python if python_version == image.python_minor else None)
    queue = deque((req, ("", *extras), "the course") for req in requirements)
    chosen: dict[str, tuple[WheelEntry, list[Requirement]]] = {}
    specs: dict[str, SpecifierSet] = {}
    satisfied: dict[str, str] = {}
    while queue:
        req, wanted, by = queue.popleft()
        if req.marker is not None and not any(req.marker.evaluate({**env, "extra": e}) for e in wanted):
            continue
        name = canonicalize_name(req.name)
        specs[name] = specs.get(name, SpecifierSet()) & req.specifier
        why = f"{req.name}{req.specifier} ({by})" if str(req.specifier) else f"{req.name} ({by})"
        have = image.packages.get(name)
        if name in chosen:
            entry, requires = chosen[name]
            if not specs[name].contains(entry.version, prereleases=True):
                raise WheelhouseError(f"{why} conflicts with {entry.file}, downloaded for {entry.why}")
            entry.why.append(why)
            follow = [r for r in requires if req.extras]
        elif have is not None and specs[name].contains(have, prereleases=True):
            satisfied[name] = have
            if not req.extras:
                continue
            with tempfile.TemporaryDirectory() as scratch:  # the extras' requirements of the image's version
                follow = _requires_dist(_download(f"{name}=={have}", Path(scratch), python_version, platforms,
                                                  timeout))
        elif name in NEVER_DOWNLOAD:
            raise WheelhouseError(f"{why}: the image's {name} is {have or 'missing'}, and a wheelhouse never "
                                  f"carries {name} (the image's build is the one that runs on its accelerator)")
        else:
            wheel = _download(f"{name}{specs[name]}", dest, python_version, platforms, timeout)
            entry = _entry(wheel)
            entry.why.append(why + (f"; the image has {have}" if have else "; not in the image"))
            requires = _requires_dist(wheel)
            chosen[name] = (entry, requires)
            satisfied.pop(name, None)
            follow = requires
        for dep in follow:
            queue.append((dep, ("", *req.extras), f"{req.name} {chosen[name][0].version}" if name in chosen
                          else f"{req.name} {have}"))
    return [entry for entry, _ in chosen.values()], dict(sorted(satisfied.items()))


def build_image_wheelhouse(folder: Path, project: Path, image: ImageVersions, extras: tuple[str, ...] = (), *,
                           python_version: str | None = None, platforms: tuple[str, ...] = IMAGE_PLATFORMS,
                           metadata: dict | None = None, timeout: float = 600) -> dict:
    """The wheelhouse that installs `project` (with `extras`) offline into `image`; returns its manifest.

    Writes into `folder` (emptied of wheels first): the project's wheel, what `image_closure` downloads,
    `manifest.json` (image, Python, every file with its size, hash and why it is there, the total size) and, with
    `metadata`, `dataset-metadata.json` with a description of the contents. `python_version` is the Python the
    wheels are for: by default the image's (`3.12` on Kaggle); `"here"` builds for this interpreter.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.whl"):
        old.unlink()
    target = image.python_minor if python_version is None else python_version
    here = ".".join(platform.python_version_tuple()[:2])
    foreign = None if target in ("here", here) else target
    project_wheel = _build_project_wheel(folder, project, timeout)
    root = _entry(project_wheel)
    root.why.append("the course package")
    spec = f"{root.name}[{','.join(extras)}]" if extras else root.name
    downloaded, satisfied = image_closure(_requires_dist(project_wheel), tuple(extras), image, folder,
                                          python_version=foreign, platforms=platforms, timeout=timeout)
    files = [root, *sorted(downloaded, key=lambda e: e.name)]
    total = sum(e.bytes for e in files)
    manifest = {
        "image": image.name, "image_title": image.title, "image_source": image.source, "image_commit": image.commit,
        "python": foreign or here, "platforms": list(platforms) if foreign else ["this machine's"],
        "requirement": spec, "install": f'pip install --no-index --find-links <this folder> "{spec}"',
        "files": [asdict(e) for e in files], "total_bytes": total, "satisfied_by_image": satisfied,
        "never_downloaded": sorted(NEVER_DOWNLOAD),
    }
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    if metadata is not None:
        listing = ", ".join(f"{e.name} {e.version}" for e in files)
        metadata = {**metadata, "description": (
            f"Installs {spec} without internet into the {image.title}, Python {foreign or here}: "
            f"`{manifest['install']}`. {len(files)} wheels, {total / 1e6:.1f} MB: {listing}. Built from the "
            f"image's versions read at {image.source} ({image.commit_date}).")}
        (folder / "dataset-metadata.json").write_text(json.dumps(metadata, indent=2) + "\n")
    return manifest
