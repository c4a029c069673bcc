"""The platform image lanes: the notebooks run in an environment made like Colab's or Kaggle's image, installing
the course the way a learner's setup cell does there.

    python build/image_lane.py venv colab-gpu          # build .venv-images/colab-gpu (`make test-images` does)
    python build/image_lane.py run colab-gpu 01 05     # run notebooks in that lane, print wall times
    python build/image_lane.py wheelhouse kaggle-gpu OUT [--python 3.11]   # the Kaggle wheelhouse, another Python

A lane's venv holds the image's versions of what the course uses (platforms/images.toml), with torch replaced by
the CPU build lying on this machine's disk (`[lanes] torch`), and no freegpu. Each notebook then runs as on a
fresh runtime of that platform, with the venv put back to the image's state after it:
- colab: the committed notebook, unchanged; its setup cell pip-installs `freegpu[...] @ git+<Repository>@v<version>`
  from GitHub, which git's `url.<base>.insteadOf` (in a GIT_CONFIG_GLOBAL file of the lane's own) redirects to a
  mirror of this working tree (tracked and untracked-not-ignored files, committed and tagged v<version>). The
  kernel's shell is a stand-in `google.colab._shell.Shell`, so `google.colab` is imported, as on Colab.
- kaggle: the notebook as a Kaggle bundle with internet off writes it (build/kaggle_bundles.py): its setup cell
  installs from the wheelhouse (built for this Python from the image's versions) with --no-index, in a kernel
  where pip reaches no index at all (PIP_NO_INDEX, no pip configuration, no find-links).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IMAGES = ROOT / "platforms" / "images.toml"
VENVS = ROOT / ".venv-images"
NOTEBOOKS = ROOT / "notebooks"
WHEELHOUSE_ID = "your-kaggle-username/freegpu-wheelhouse"  # the dataset a Kaggle bundle attaches
MIRROR_MAX_BYTES = 100 * 10**6  # the repository is a few MB; more means something unignored came along
STAMP = ".installed"  # written last by `venv`: the lane's versions as JSON
_SNAPSHOT = r"""
import importlib.metadata as m, json, re
versions = {re.sub(r"[-_.]+", "-", d.metadata["Name"]).lower(): d.version for d in m.distributions()}
try:
    url = m.distribution("freegpu").read_text("direct_url.json")
except m.PackageNotFoundError:
    url = None
print(json.dumps({"versions": versions, "freegpu_direct_url": json.loads(url) if url else None}))
"""
# A stand-in for what Colab's kernel has: the google.colab package, its kernel class and that kernel's shell class
# (Accelerate's notebook_launcher and freegpu.launch tell Colab by "google.colab" in str(get_ipython())). Colab
# starts its kernel with --IPKernelApp.kernel_class=google.colab._kernel.Kernel, as the lane does.
_COLAB_STUB = {
    "google/colab/__init__.py": '"""Stand-in for Colab\'s google.colab (the course\'s Colab image lane)."""\n',
    "google/colab/_shell.py": ('"""Stand-in for Colab\'s kernel shell class."""\n\n'
                               "from ipykernel.zmqshell import ZMQInteractiveShell\n\n\n"
                               "class Shell(ZMQInteractiveShell):\n"
                               '    """The shell of a Colab kernel: str(get_ipython()) names google.colab."""\n'),
    "google/colab/_kernel.py": ('"""Stand-in for Colab\'s kernel class."""\n\n'
                                "from ipykernel.ipkernel import IPythonKernel\n"
                                "from traitlets import Type\n\n"
                                "from google.colab import _shell\n\n\n"
                                "class Kernel(IPythonKernel):\n"
                                '    """A Colab kernel: its shell is google.colab._shell.Shell."""\n\n'
                                "    shell_class = Type(_shell.Shell)\n"),
}


def _run(cmd: list[str], *, timeout: float = 1800, env: dict | None = None, cwd: Path | None = None) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({done.returncode}):\n"
                           f"{(done.stderr or done.stdout)[-3000:]}")
    return done.stdout


def load(name: str):
    """The image `name` (build/wheelhouse.py `ImageVersions`) and the torch the lanes run instead of the image's."""
    from build.wheelhouse import load_image

    image = load_image(IMAGES, name)
    lanes = tomllib.loads(IMAGES.read_text()).get("lanes", {})
    if not image.lane:
        raise ValueError(f"image {name!r} is data only (no `lane` in {IMAGES})")
    if "torch" not in lanes:
        raise ValueError(f"{IMAGES} has no [lanes] torch")
    return image, lanes["torch"]


def venv_dir(name: str) -> Path:
    return VENVS / name


def lane_python(name: str) -> Path:
    return venv_dir(name) / "bin" / "python"


def build_venv(name: str, dest: Path | None = None) -> dict:
    """Create the lane's venv: the image's pip, then its packages at its versions, torch the lane's CPU build.

    No freegpu. `--no-compile`: the lane's kernels byte-compile what they import, once (they run without
    PYTHONDONTWRITEBYTECODE, as on the images), instead of pip compiling all of torch. Writes `.installed` (what
    was installed) last; returns it.
    """
    image, torch = load(name)
    dest = Path(dest or venv_dir(name))
    if dest.exists():
        shutil.rmtree(dest)
    start = time.perf_counter()
    _run([sys.executable, "-m", "venv", str(dest)])
    python = str(dest / "bin" / "python")
    pip = [python, "-m", "pip", "--disable-pip-version-check", "install", "--quiet", "--no-compile"]
    if "pip" in image.packages:
        _run([*pip, f"pip=={image.packages['pip']}"])
    pins = [f"{pkg}=={torch if pkg == 'torch' else version}" for pkg, version in image.packages.items()
            if pkg != "pip"]
    _run([*pip, *pins])
    installed = json.loads(_run([python, "-c", _SNAPSHOT]))["versions"]
    if "freegpu" in installed:
        raise RuntimeError(f"{dest} has freegpu {installed['freegpu']}: a lane must start without it")
    wrong = {p: (v, installed.get(p)) for p, v in image.packages.items()
             if p != "torch" and installed.get(p) != v}
    if wrong:
        raise RuntimeError(f"{dest}: installed versions differ from {name}'s: {wrong}")
    record = {"image": name, "python": _run([python, "-c", "import platform; print(platform.python_version())"]
                                            ).strip(),
              "torch": installed["torch"], "image_torch": image.packages["torch"], "versions": installed,
              "build_s": round(time.perf_counter() - start, 1)}
    (dest / STAMP).write_text(json.dumps(record, indent=2) + "\n")
    return record


def project_version() -> str:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def repository_url() -> str:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Repository"].rstrip("/")


def make_mirror(dest: Path, root: Path = ROOT, version: str | None = None) -> tuple[Path, str]:
    """A fresh git repository at `dest` holding `root`'s working tree (tracked and untracked-not-ignored files, as
    they are on disk), committed and tagged `v<version>`; returns it and the commit."""
    version = version or project_version()
    listed = _run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"])
    dest = Path(dest)
    dest.mkdir(parents=True)
    files = [rel for rel in sorted(set(filter(None, listed.split("\0"))))
             if (root / rel).is_file()]  # a tracked file deleted on disk is not part of what is on disk
    size = sum((root / rel).stat().st_size for rel in files)
    if size > MIRROR_MAX_BYTES:
        biggest = sorted(files, key=lambda rel: (root / rel).stat().st_size)[-3:]
        raise RuntimeError(f"the working tree's files come to {size / 1e6:.0f} MB (largest: {', '.join(biggest)}): "
                           "is a venv or a build folder missing from .gitignore?")
    for rel in files:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, dest / rel)
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_NAME": "image lane", "GIT_AUTHOR_EMAIL": "lane@localhost",
           "GIT_COMMITTER_NAME": "image lane", "GIT_COMMITTER_EMAIL": "lane@localhost"}
    git = ["git", "-C", str(dest)]
    _run([*git, "init", "--quiet", "--initial-branch", "main"], env=env)
    _run([*git, "add", "--all"], env=env)
    _run([*git, "commit", "--quiet", "--no-verify", "-m", f"mirror of {root} for an image lane"], env=env)
    _run([*git, "tag", "-a", f"v{version}", "-m", f"freegpu {version}"], env=env)
    return dest, _run([*git, "rev-parse", "HEAD"], env=env).strip()


def write_git_config(path: Path, mirror: Path, url: str | None = None) -> Path:
    """A git config file that sends `url` (the course's GitHub repository) to `mirror` instead."""
    url = url or repository_url()
    path = Path(path)
    path.write_text(f'[url "{Path(mirror).resolve().as_uri()}"]\n\tinsteadOf = {url}\n'
                    "[advice]\n\tdetachedHead = false\n")
    return path


def write_colab_stub(folder: Path) -> Path:
    for rel, text in _COLAB_STUB.items():
        (Path(folder) / rel).parent.mkdir(parents=True, exist_ok=True)
        (Path(folder) / rel).write_text(text)
    return Path(folder)


def write_kernelspec(jupyter_dir: Path, python: Path, env: dict[str, str], *, unset: tuple[str, ...] = (),
                     extra_args: tuple[str, ...] = ()) -> Path:
    """The lane's kernel, registered as `python3` under `jupyter_dir` (put first on JUPYTER_PATH): the kernel
    that build/run_course.py's `execute` starts is then the lane's. `unset` names variables the kernel must not
    inherit (`env -u`)."""
    folder = Path(jupyter_dir) / "kernels" / "python3"
    folder.mkdir(parents=True, exist_ok=True)
    unset = ("PYTHONDONTWRITEBYTECODE", *unset)  # the images cache bytecode; the venv was installed --no-compile
    prefix = ["env", *(a for name in unset for a in ("-u", name))]
    spec = {"argv": [*prefix, str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}", *extra_args],
            "display_name": "image lane", "language": "python",
            "env": {"PYDEVD_DISABLE_FILE_VALIDATION": "1", **env}}  # debugpy's frozen-modules warning, once a run
    (folder / "kernel.json").write_text(json.dumps(spec, indent=2) + "\n")
    return folder


def snapshot(python: Path) -> dict:
    """The lane's installed versions (canonical names) and freegpu's direct_url.json (None: not installed)."""
    return json.loads(_run([str(python), "-c", _SNAPSHOT]))


def restore(python: Path, before: dict[str, str], after: dict[str, str]) -> None:
    """Put the venv back as `before`: uninstall what was added, reinstall (no dependencies) what changed."""
    added = sorted(set(after) - set(before))
    changed = sorted(p for p in before if after.get(p) != before[p])
    if "torch" in changed:
        raise RuntimeError(f"the notebook changed torch ({before['torch']} -> {after.get('torch')}); a lane never "
                           "downloads torch")
    pip = [str(python), "-m", "pip", "--disable-pip-version-check"]
    if added:
        _run([*pip, "uninstall", "--yes", "--quiet", *added])
    if changed:
        _run([*pip, "install", "--quiet", "--no-deps", *(f"{p}=={before[p]}" for p in changed)])


@dataclass
class LaneRun:
    """One notebook run in a lane: the course runner's record and what the setup cell changed in the venv."""

    name: str
    status: str
    wall_s: float
    restore_s: float
    results: str | None
    error: str | None
    executed: str | None
    added: dict[str, str] = field(default_factory=dict)
    changed: dict[str, list[str]] = field(default_factory=dict)  # name: [image's, after the run]
    freegpu_direct_url: dict | None = None


def run_lane(name: str, notebooks: list[str], out: Path, parameters: dict | None = None) -> dict:
    """Run `notebooks` (names or prefixes) in the lane of image `name`; write and return `out/lane.json`.

    The venv (`.venv-images/<name>`) must exist (`python build/image_lane.py venv <name>`, or `make test-images`).
    """
    from build import kaggle_bundles as kaggle
    from build import run_course
    from build.wheelhouse import build_image_wheelhouse
    from freegpu.platform import kaggle_dataset_dirs

    image, _ = load(name)
    python = lane_python(name)
    stamp = venv_dir(name) / STAMP
    if not stamp.is_file():
        raise FileNotFoundError(f"no lane venv at {venv_dir(name)}: run `python build/image_lane.py venv {name}` "
                                "or `make test-images`")
    venv = json.loads(stamp.read_text())
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"lane-{name}-", dir=out))
    paths = sorted(NOTEBOOKS.glob("*.ipynb"))
    chosen = [p for p in paths if any(p.stem.startswith(n) for n in notebooks)] if notebooks else paths
    if notebooks and len(chosen) < len(notebooks):
        raise ValueError(f"notebooks {notebooks} match only {[p.stem for p in chosen]}")
    env: dict[str, str] = {}
    unset: tuple[str, ...] = ()
    extra_args: tuple[str, ...] = ()
    lane = {"image": name, "lane": image.lane, "out": str(out), "title": image.title, "image_python": image.python,
            "image_source": image.source, "image_commit": image.commit, "read_on": image.read_on,
            "python": venv["python"], "torch": venv["torch"], "image_torch": image.packages["torch"],
            "torch_note": f"torch {venv['torch']} (CPU, the build on this machine's disk) in place of the image's "
                          f"{image.packages['torch']}",
            "venv_build_s": venv["build_s"], "image_versions": venv["versions"]}
    start = time.perf_counter()
    if image.lane == "colab":
        mirror, commit = make_mirror(work / "mirror")
        lane.update(mirror_commit=commit, tag=f"v{project_version()}", repository=repository_url())
        env.update(GIT_CONFIG_GLOBAL=str(write_git_config(work / "gitconfig", mirror)), GIT_CONFIG_NOSYSTEM="1",
                   PYTHONPATH=str(write_colab_stub(work / "colab-stub")))
        extra_args = ("--IPKernelApp.kernel_class=google.colab._kernel.Kernel",)
        sources = {p.stem: p for p in chosen}
    elif image.lane == "kaggle":
        input_dir = work / "kaggle" / "input"
        house = Path(kaggle_dataset_dirs(WHEELHOUSE_ID, input_dir)[0])  # Kaggle's newer layout
        manifest = build_image_wheelhouse(house, ROOT, image, kaggle.course_extras(chosen), python_version="here")
        lane.update(wheelhouse=str(house), wheelhouse_manifest=manifest)
        sources = {}
        for p in chosen:
            meta = kaggle.kernel_metadata(kaggle.OWNER, p.stem.replace("_", " "), p.name, internet=False,
                                          dataset_sources=[WHEELHOUSE_ID])
            bundle = work / "bundles" / kaggle.slugify(p.stem)
            kaggle.write_kernel_bundle(p, bundle, meta, wheelhouse=WHEELHOUSE_ID, input_dir=input_dir)
            sources[p.stem] = bundle / p.name
        # No internet for pip: no index, no configuration, no find-links folder but the wheelhouse it is given.
        env.update(KAGGLE_KERNEL_RUN_TYPE="Batch", PIP_NO_INDEX="1", PIP_CONFIG_FILE=os.devnull)
        unset = ("PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL", "PIP_INDEX_URL")
    else:
        raise ValueError(f"image {name!r}: unknown lane {image.lane!r}")
    lane["prepare_s"] = round(time.perf_counter() - start, 1)
    jupyter_dir = write_kernelspec(work / "jupyter", python, env, unset=unset, extra_args=extra_args).parents[1]
    print(f"{name} lane ({image.title}): Python {venv['python']}, {lane['torch_note']}", flush=True)
    runs = []
    base = venv["versions"]  # the image as the venv was built; a run that was cut short may have left changes
    restore(python, base, snapshot(python)["versions"])
    saved = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = os.pathsep.join(filter(None, [str(jupyter_dir), saved]))
    try:
        for stem, notebook in sources.items():
            print(f"  {stem} ...", flush=True)
            record = run_course.execute(notebook, out, parameters or {"profile": "smoke"}, solutions=False)
            state = snapshot(python)
            begin = time.perf_counter()
            restore(python, base, state["versions"])
            now = state["versions"]
            runs.append(LaneRun(stem, record.status, record.wall_s, round(time.perf_counter() - begin, 1),
                                record.results, record.error, record.executed,
                                {p: v for p, v in now.items() if p not in base},
                                {p: [v, now.get(p)] for p, v in base.items() if now.get(p) != v},
                                state["freegpu_direct_url"]))
            print(f"  {stem}: {record.status} in {record.wall_s:.1f} s", flush=True)
    finally:
        if saved is None:
            os.environ.pop("JUPYTER_PATH", None)
        else:
            os.environ["JUPYTER_PATH"] = saved
    lane["runs"] = [asdict(r) for r in runs]
    lane["runs_s"] = round(sum(r.wall_s + r.restore_s for r in runs), 1)
    (out / "lane.json").write_text(json.dumps(lane, indent=2) + "\n")
    return lane


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    venv = sub.add_parser("venv", help="build the lane venv of an image (.venv-images/<image>)")
    venv.add_argument("image")
    run = sub.add_parser("run", help="run notebooks in an image's lane (its venv must exist)")
    run.add_argument("image")
    run.add_argument("notebooks", nargs="*", help="names or prefixes (default: all)")
    run.add_argument("--out", type=Path, help="output folder (default: a new temporary folder)")
    house = sub.add_parser("wheelhouse", help="the wheelhouse that installs the course offline into an image")
    house.add_argument("image")
    house.add_argument("out", type=Path)
    house.add_argument("--python", help="the Python the wheels are for: 3.12, or 'here' (default: the image's)")
    args = parser.parse_args(argv)
    if args.command == "venv":
        record = build_venv(args.image)
        print(f"{venv_dir(args.image)}: Python {record['python']}, torch {record['torch']} (the image has "
              f"{record['image_torch']}), built in {record['build_s']} s")
    elif args.command == "run":
        lane = run_lane(args.image, args.notebooks, args.out or Path(tempfile.mkdtemp(prefix="lane-")))
        for r in lane["runs"]:
            print(f"{r['name']:28} {r['status']:7} {r['wall_s']:7.1f} s  (+{r['restore_s']} s restore)"
                  + (f"  {r['error']}" if r["error"] else ""))
        print(f"venv build {lane['venv_build_s']} s, prepare {lane['prepare_s']} s, runs {lane['runs_s']} s")
        return 1 if any(r["status"] != "ok" for r in lane["runs"]) else 0
    else:
        from build import kaggle_bundles as kaggle
        from build.wheelhouse import build_image_wheelhouse, load_image

        image = load_image(IMAGES, args.image)
        extras = kaggle.course_extras(sorted(NOTEBOOKS.glob("*.ipynb")))
        manifest = build_image_wheelhouse(args.out, ROOT, image, extras, python_version=args.python,
                                          metadata=kaggle.dataset_metadata(kaggle.OWNER, "freegpu wheelhouse"))
        for entry in manifest["files"]:
            print(f"{entry['file']:60} {entry['bytes'] / 1e6:8.1f} MB  {'; '.join(entry['why'])}")
        print(f"{len(manifest['files'])} wheels, {manifest['total_bytes'] / 1e6:.1f} MB, for Python "
              f"{manifest['python']}: {args.out}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))  # the siblings import as build.<name>, as in the tests
    sys.exit(main())
