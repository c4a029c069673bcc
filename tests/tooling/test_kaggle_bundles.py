"""The Kaggle bundles and the wheelhouse that `make course` writes (build/kaggle_bundles.py, build/wheelhouse.py).

Course tooling, not the package: these read notebooks/ and platforms/ of the checkout. The walk that decides what
a wheelhouse holds for an image, and the bundles' setup cells per notebook, are tested in
tests/lanes/test_image_lanes.py.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import NOTEBOOK_DIR, ROOT

from build import kaggle_bundles as kaggle
from build import wheelhouse

NOTEBOOK = sorted(NOTEBOOK_DIR.glob("*.ipynb"))[0]  # any course notebook: its setup cell is generated


def test_kaggle_metadata_is_valid_and_names_the_shape(tmp_path):
    meta = kaggle.kernel_metadata("me", "06 Kaggle commit workflow", "nb.ipynb", dataset_sources=["me/wheels"])
    assert meta["id"] == "me/06-kaggle-commit-workflow" and meta["machine_shape"] == "NvidiaTeslaT4"
    assert kaggle.validate_kernel_metadata(meta) == []
    assert kaggle.kernel_metadata("me", "TPU run", "nb.ipynb", accelerator="tpu")["machine_shape"] == "TpuV5E8"
    assert "machine_shape" not in kaggle.kernel_metadata("me", "CPU run", "nb.ipynb", accelerator="cpu")
    assert "is not in" in kaggle.validate_kernel_metadata(meta, tmp_path)[0]
    notebook = tmp_path / "06.ipynb"
    notebook.write_text("{}")
    written = kaggle.write_kernel_bundle(notebook, tmp_path / "bundle", meta)
    assert json.loads(written.read_text()) == meta and (tmp_path / "bundle" / "nb.ipynb").is_file()
    assert kaggle.dataset_metadata("me", "freegpu wheelhouse") == {
        "title": "freegpu wheelhouse", "id": "me/freegpu-wheelhouse", "licenses": [{"name": "CC0-1.0"}]}


@pytest.mark.parametrize(("change", "problem"), [
    ({"machine_shape": "NvidiaTeslaP100"}, "retired"),
    ({"machine_shape": None}, "without machine_shape"),
    ({"title": "abc"}, "five characters"),
    ({"id": "me/06-kaggle-commit-workflow/3"}, "without a version"),
    ({"id": "me/other-slug"}, "slug of the title"),
    ({"language": "julia"}, "language"),
    ({"kernel_type": "app"}, "kernel_type"),
    ({"dataset_sources": ["no-owner"]}, "dataset_sources"),
    ({"kernel_sources": "me/x"}, "must be a list"),
    ({"docker_image_pinning_type": "newest"}, "docker_image_pinning_type"),
    ({"code_file": ""}, "code_file"),
])
def test_kaggle_metadata_problems(change, problem):
    meta = {**kaggle.kernel_metadata("me", "06 Kaggle commit workflow", "nb.ipynb"), **change}
    assert any(problem in p for p in kaggle.validate_kernel_metadata(meta))


def test_offline_bundle_never_installs_from_github(tmp_path):
    """Internet off with the generated setup cell (pip from GitHub) is refused; with a wheelhouse it is rewritten."""
    meta = kaggle.kernel_metadata("me", "06 Kaggle commit workflow", "nb.ipynb", dataset_sources=["me/wheels"])
    with pytest.raises(ValueError, match="installs from GitHub"):
        kaggle.write_kernel_bundle(NOTEBOOK, tmp_path / "online-setup", meta)
    with pytest.raises(ValueError, match="not attached"):
        kaggle.write_kernel_bundle(NOTEBOOK, tmp_path / "other", meta, wheelhouse="me/other")
    kaggle.write_kernel_bundle(NOTEBOOK, tmp_path / "offline", meta, wheelhouse="me/wheels")
    assert kaggle.validate_kernel_metadata(meta, tmp_path / "offline") == []
    original = json.loads(NOTEBOOK.read_text())["cells"]
    bundled = json.loads((tmp_path / "offline" / "nb.ipynb").read_text())["cells"]
    changed = [i for i, (a, b) in enumerate(zip(original, bundled, strict=True)) if a != b]
    assert changed == [2] and "--find-links" in "".join(bundled[2]["source"])  # only the setup cell
    setup = "".join(bundled[2]["source"])
    assert setup == kaggle.offline_setup_source("me/wheels", *kaggle.setup_requirement(NOTEBOOK))
    assert "--no-index" in setup and '"/kaggle/input/wheels",' in setup and "git+https" not in setup
    online = {**meta, "enable_internet": True}
    kaggle.write_kernel_bundle(NOTEBOOK, tmp_path / "online", online)  # internet on: the copy as it is
    assert (tmp_path / "online" / "nb.ipynb").read_bytes() == NOTEBOOK.read_bytes()


def test_course_bundles_are_valid_and_never_p100(tmp_path):
    """What `make course` writes to build/out/kaggle/ (and, if a build is there, what it wrote)."""
    notebooks = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
    written = kaggle.write_course_bundles(tmp_path, notebooks)
    assert [p.parent.name for p in written] == [kaggle.slugify(nb.stem) for nb in notebooks]
    built = sorted((ROOT / "build" / "out" / "kaggle").glob("*/kernel-metadata.json"))
    for path in written + built:
        meta = json.loads(path.read_text())
        assert kaggle.validate_kernel_metadata(meta, path.parent) == [], path
        assert meta["machine_shape"] == ("TpuV5E8" if "-tpu-" in meta["id"] else "NvidiaTeslaT4")
        assert "p100" not in path.read_text().lower()
    for path in written:  # a copy of the committed notebook, outputs-free
        code_file = json.loads(path.read_text())["code_file"]
        assert (path.parent / code_file).read_bytes() == (NOTEBOOK_DIR / code_file).read_bytes()
    # The wheelhouse: the course's wheel and what the Kaggle image lacks (tests/lanes/test_image_lanes.py checks
    # which).
    house = tmp_path / "wheelhouse"
    manifest = json.loads((house / "manifest.json").read_text())
    assert manifest["image"] == "kaggle-gpu" and manifest["files"][0]["file"] == "freegpu-0.1.0-py3-none-any.whl"
    assert manifest["requirement"] == f"freegpu[{','.join(kaggle.course_extras(notebooks))}]"
    assert sorted(p.name for p in house.iterdir()) == sorted(
        ["dataset-metadata.json", "manifest.json", *(f["file"] for f in manifest["files"])])
    assert not any(f["name"] == "torch" for f in manifest["files"])
    assert json.loads((house / "dataset-metadata.json").read_text())["id"] == "your-kaggle-username/freegpu-wheelhouse"


def test_wheelhouse_round_trip(tmp_path, monkeypatch):
    """A project's wheelhouse for an image that has what it needs: its wheel alone, installed with --no-index."""
    project = tmp_path / "tiny"
    (project / "tinypkg").mkdir(parents=True)
    (project / "tinypkg" / "__init__.py").write_text("ANSWER = 42\n")
    (project / "pyproject.toml").write_text('[build-system]\nrequires = ["hatchling"]\nbuild-backend = '
                                            '"hatchling.build"\n[project]\nname = "tinypkg"\nversion = "1.0"\n'
                                            'dependencies = ["numpy>=1"]\n')
    image = wheelhouse.ImageVersions("img", "an image", "3.12.13", "https://github.com/x/y", "0" * 40, "2026-01-01",
                                     "2026-01-02", "nothing", {"torch": "2.10.0", "numpy": "2.0.2"})
    monkeypatch.chdir(tmp_path)  # a relative path is a path, not a name for pip to look up on an index
    manifest = wheelhouse.build_image_wheelhouse(tmp_path / "house", project.relative_to(tmp_path), image,
                                                 python_version="here", metadata={"title": "tiny wheels"})
    assert [f["file"] for f in manifest["files"]] == ["tinypkg-1.0-py2.py3-none-any.whl"]
    assert manifest["satisfied_by_image"] == {"numpy": "2.0.2"}
    assert json.loads((tmp_path / "house" / "dataset-metadata.json").read_text())["title"] == "tiny wheels"
    target = tmp_path / "target"
    subprocess.run([sys.executable, "-m", "pip", "--isolated", "install", "--quiet", "--no-index", "--no-deps",
                    "--find-links", str(tmp_path / "house"), "--target", str(target), "tinypkg"], check=True)
    found = subprocess.run([sys.executable, "-c", "import tinypkg; print(tinypkg.ANSWER, tinypkg.__file__)"],
                           env={"PYTHONPATH": str(target)}, capture_output=True, text=True, check=True).stdout
    assert found.startswith("42 " + str(target))


def test_the_wheelhouse_leaves_out_extras_with_no_wheel(tmp_path):
    """DeepSpeed has no wheel (pip builds it from source): no wheelhouse installs it, so the walk never asks for it."""
    source = NOTEBOOK.read_text()
    spec = kaggle.setup_requirement(NOTEBOOK)[0]
    assert spec == "freegpu", "the first notebook's setup cell installs freegpu alone"
    source = source.replace('"freegpu @ git+', '"freegpu[deepspeed,hub] @ git+')
    notebook = tmp_path / "nb.ipynb"
    notebook.write_text(source.replace('NEEDS = (\\"freegpu\\",)', 'NEEDS = (\\"freegpu\\", \\"deepspeed\\")'))
    assert kaggle.setup_requirement(notebook)[0] == "freegpu[deepspeed,hub]"
    assert kaggle.course_extras([notebook]) == ("hub",) and kaggle.NO_WHEEL_EXTRAS == ("deepspeed",)
