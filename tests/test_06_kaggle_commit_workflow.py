"""Notebook 06 (Kaggle commit workflow) and its helpers: freegpu.resume, freegpu.kaggle, freegpu.wheelhouse."""

from __future__ import annotations

import json
import math
import re
import statistics
from pathlib import Path

import pytest

from freegpu import kaggle, resume, wheelhouse
from freegpu.platform import PlatformInfo, kaggle_dataset_dir, platform_dirs, rehearsal_dirs

NAME = "06_kaggle_commit_workflow"


# ---------------------------------------------------------------- the notebook, executed once (smoke, CPU, offline)

@pytest.mark.notebook
def test_06_kill_and_resume_is_exact(notebook_run):
    _, r, out = notebook_run
    p = r["parameters"]
    assert r["data_source"].startswith("sklearn.datasets.load_digits")
    assert r["steps_per_epoch"] == math.ceil(1438 / p["batch_size"])  # the digits' train split, 1438 images
    assert r["killed_exit_status"] == -9  # SIGKILL from the notebook
    # The kill is sent when the run reports kill_at_step; a loaded machine may let it take a step more first.
    assert p["kill_at_step"] <= r["killed_at_step"] < r["steps_per_epoch"]  # mid-epoch
    assert r["killed_at_step"] % p["checkpointing_steps"] != 0  # between two checkpoints
    last_checkpoint = r["killed_at_step"] // p["checkpointing_steps"] * p["checkpointing_steps"]
    assert r["checkpoints_after_kill"] == [f"step_{last_checkpoint}"]
    assert r["resumed_from_checkpoint"] == f"step_{last_checkpoint}"
    assert r["resume_max_abs_weight_diff"] == 0.0
    assert "accelerator.load_state(" in (out / "train_resumable.py").read_text()


@pytest.mark.notebook
def test_06_automatic_naming_pitfalls(notebook_run):
    _, r, _ = notebook_run
    limit = r["parameters"]["total_limit"]
    assert r["checkpoint_files"] == ["model.safetensors", "optimizer.bin", "random_states_0.pkl"]
    assert r["automatic_naming_kept"] == [f"checkpoint_{i}" for i in range(1, limit + 1)]
    assert r["counter_after_load"] == 0  # load_state does not restore the save counter
    assert r["automatic_naming_after_resume"] == ["checkpoint_0", f"checkpoint_{limit}"]
    assert "already exists" in r["counter_error"]
    assert r["automatic_naming_warnings"] > 0  # "Deleting N checkpoints to make room", collected
    assert r["half_written_error"].startswith("FileNotFoundError") and "optimizer.bin" in r["half_written_error"]


@pytest.mark.notebook
def test_06_kill_during_save_and_output_budget(notebook_run):
    _, r, out = notebook_run
    p = r["parameters"]
    step = p["checkpointing_steps"]
    assert r["kill_during_save_exit_status"] == -9
    assert r["kill_during_save_left"] == [f".step_{2 * step}.tmp", f"step_{step}"]
    assert r["kill_during_save_loaded"] == f"step_{step}" and r["kill_during_save_recovered"] is True
    assert r["checkpoints_kept"] == p["total_limit"]
    saved_steps = range(step, r["parameters"]["num_epochs"] * r["steps_per_epoch"] + 1, step)
    assert sorted(x.name for x in (out / "killed" / "checkpoints").iterdir()) == [
        f"step_{s}" for s in saved_steps[-p["total_limit"]:]]  # the newest total_limit, nothing else
    assert r["checkpoint_bytes"] == resume.dir_bytes(out / "killed_mid_save" / "checkpoints" / f"step_{step}")
    assert r["checkpoint_bytes"] > 4 * 64 * p["hidden_size"]  # at least the fp32 weights of the first layer
    assert r["output_dir_bytes"] >= r["checkpoints_kept"] * r["checkpoint_bytes"]
    assert r["output_budget_bytes"] is None  # no cap outside Kaggle
    assert r["output_share_of_kaggle_budget"] == r["output_dir_bytes"] / (20 * 1000**3)
    assert r["budget_guard_refused"] is True and f"{r['output_dir_bytes']:,} bytes already used" in \
        r["budget_guard_reason"]


@pytest.mark.notebook
def test_06_time_budget_and_commit_rehearsal(notebook_run):
    _, r, out = notebook_run
    stop = r["time_budget_stop"]
    assert stop["event"] == "time_budget" and 0 < stop["step"] < 2 * r["steps_per_epoch"]
    assert stop["remaining_s"] < r["parameters"]["time_budget_s"]
    assert r["commit_resumed_from"] == stop["checkpoint"] == f"step_{stop['step']}"
    assert r["commit_max_abs_weight_diff"] == 0.0
    rehearsal = out / "rehearsal" / "kaggle"
    attached = rehearsal / "input" / "06-kaggle-commit-workflow" / NAME / "train" / "checkpoints"
    assert (attached / stop["checkpoint"]).is_dir()
    # The Kaggle branch looks for attached checkpoints the same way; here, in the rehearsed input folder.
    assert resume.attached_checkpoints(rehearsal / "input", f"{NAME}/train") == [attached]
    assert resume.attached_checkpoints(rehearsal / "input", "other/train") == []
    assert (rehearsal / "working" / NAME / "train" / "final" / "model.safetensors").is_file()


@pytest.mark.notebook
def test_06_kernel_metadata_and_wheelhouse(notebook_run):
    _, r, out = notebook_run
    meta = r["kernel_metadata"]
    assert meta["machine_shape"] == "NvidiaTeslaT4" and meta["enable_gpu"] is True
    assert meta["enable_internet"] is False and meta["dataset_sources"] == ["your-kaggle-username/freegpu-wheelhouse"]
    # The CLI's own checks (kaggle-cli kernels_push): title >= 5 characters, id owner/slug, slug = the title's.
    slug = "-".join(re.findall(r"[a-z0-9]+", meta["title"].lower()))
    assert len(meta["title"]) >= 5 and meta["id"] == f"your-kaggle-username/{slug}" == meta["kernel_sources"][0]
    assert meta["code_file"] == f"{NAME}.ipynb" and meta["kernel_type"] == "notebook"
    bundle = out / "kaggle" / slug
    assert json.loads((bundle / "kernel-metadata.json").read_text()) == meta
    assert r["kaggle_commands"][0] == f"kaggle kernels push -p kaggle/{slug}"
    # The wheelhouse lines install what the setup cell installs, from where Kaggle mounts the dataset, offline.
    notebook = Path(__file__).resolve().parents[1] / "notebooks" / f"{NAME}.ipynb"
    setup = "".join(json.loads(notebook.read_text())["cells"][2]["source"])
    lines = r["wheelhouse_commands"]
    assert lines[0].split('"')[1] in setup and "pip install --no-index --find-links" in lines[-1]
    assert kaggle_dataset_dir(meta["dataset_sources"][0]) in lines[-1]


@pytest.mark.notebook
def test_06_quota_plan(notebook_run):
    _, r, _ = notebook_run
    p = r["parameters"]
    assert len(r["setup_s"]) == 4 and all(s > 0 for s in r["setup_s"])
    assert r["median_step_ms"] > 0 and r["epoch_s"] > r["median_step_ms"] / 1000
    plan = resume.plan_epochs(r["epoch_s"], statistics.median(r["setup_s"]), p["session_hours"] * 3600,
                              p["weekly_quota_hours"] * 3600, session_margin=0.1, week_share=0.3)
    assert r["quota_plan"] == plan and plan["epochs_per_session"] > 0
    # A smoke epoch's count says nothing about a real model: recorded, never a headline (issue 17).
    assert not any("epoch" in key for key in r["headline"])


@pytest.mark.notebook
def test_06_outputs_name_no_build_machine_path(notebook_run):
    """Paths are printed relative to the output folder (the check cell alone says where that is)."""
    import nbformat

    record, _, out = notebook_run
    nb = nbformat.read(out.parents[1] / record.executed, as_version=4)
    check = next(i for i, c in enumerate(nb.cells) if "check_parameters(NOTEBOOK" in c.source)
    root = str(Path(__file__).resolve().parents[1])
    for cell in nb.cells[check + 1:]:
        for output in cell.get("outputs", []):
            text = output.get("text", "") + json.dumps(output.get("data", {}))
            assert str(out) not in text and root not in text, (cell.source[:80], text[:300])


# ---------------------------------------------------------------- helpers against oracles

def _accelerator_with_model(seed=0):
    import torch
    from accelerate import Accelerator

    accelerator = Accelerator(cpu=True)
    torch.manual_seed(seed)
    model = torch.nn.Linear(4, 2)
    model, optimizer = accelerator.prepare(model, torch.optim.AdamW(model.parameters()))
    return accelerator, model


def test_save_checkpoint_rotates_after_publishing(tmp_path):
    accelerator, _ = _accelerator_with_model()
    for step in (10, 20, 30):
        resume.save_checkpoint(accelerator, tmp_path, step, total_limit=2)
    assert [p.name for p in resume.list_checkpoints(tmp_path)] == ["step_20", "step_30"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_20", "step_30"]  # no temp folder left


def test_a_save_that_dies_publishes_nothing(tmp_path):
    accelerator, _ = _accelerator_with_model()
    resume.save_checkpoint(accelerator, tmp_path, 10, total_limit=2)

    def die(tmp):
        assert (tmp / "model.safetensors").is_file()  # written, not yet published
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        resume.save_checkpoint(accelerator, tmp_path, 20, total_limit=1, written=die)
    assert resume.latest_checkpoint(tmp_path).name == "step_10"  # the old one is still there: nothing deleted
    assert (tmp_path / ".step_20.tmp").is_dir()
    resume.save_checkpoint(accelerator, tmp_path, 20, total_limit=1)  # the next save clears the leftover
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_20"]


def test_latest_checkpoint_across_folders(tmp_path):
    for folder, step in (("a", 5), ("a", 30), ("b", 12), ("b", 40)):
        (tmp_path / folder / f"step_{step}").mkdir(parents=True)
    (tmp_path / "b" / ".step_50.tmp").mkdir()
    (tmp_path / "b" / "step_x").mkdir()
    assert resume.latest_checkpoint(tmp_path / "a", tmp_path / "b", tmp_path / "missing").name == "step_40"
    assert resume.latest_checkpoint(tmp_path / "missing") is None
    assert resume.checkpoint_step("step_007") == 7 and resume.checkpoint_step(".step_7.tmp") is None
    # The script's own copies (it runs without freegpu) pick the same folders.
    namespace = _script_namespace()
    assert namespace["latest_checkpoint"](tmp_path / "a", tmp_path / "b", tmp_path / "missing").name == "step_40"
    assert namespace["latest_checkpoint"](tmp_path / "missing") is None
    assert namespace["list_checkpoints"](tmp_path / "b") == resume.list_checkpoints(tmp_path / "b")


def _script_namespace() -> dict:
    """The functions of notebook 06's training script (its `main` does not run)."""
    import nbformat

    nb = nbformat.read(Path(__file__).resolve().parents[1] / "notebooks" / f"{NAME}.ipynb", as_version=4)
    script = next(c.source for c in nb.cells if c.source.startswith("%%writefile")).split("\n", 1)[1]
    namespace: dict = {"__name__": "train_resumable"}
    exec(compile(script, "train_resumable.py", "exec"), namespace)  # noqa: S102 - the notebook's own script
    return namespace


def test_loaded_checkpoint_restores_weights(tmp_path):
    accelerator, model = _accelerator_with_model(seed=0)
    saved = resume.save_checkpoint(accelerator, tmp_path, 3, total_limit=1)
    other, other_model = _accelerator_with_model(seed=1)
    other.load_state(str(saved))
    assert all((a == b).all() for a, b in zip(model.parameters(), other_model.parameters(), strict=True))


def test_check_save_fits(tmp_path):
    (tmp_path / "a.bin").write_bytes(b"x" * 1000)
    assert resume.dir_bytes(tmp_path) == 1000
    assert resume.check_save_fits(tmp_path, 500, None) is None
    assert resume.check_save_fits(tmp_path, 500, 1500) is None
    reason = resume.check_save_fits(tmp_path, 501, 1500)
    assert "1,000 bytes already used + 501" in reason and "1,500" in reason
    assert "free" in resume.check_save_fits(tmp_path, 10**18, None)


def test_plan_epochs():
    hour = 3600
    assert resume.plan_epochs(hour, 0, 12 * hour, 30 * hour, session_margin=0.2, week_share=1.0) == {
        "epochs_per_session": 9, "sessions_per_week": 3, "epochs_per_week": 24}  # 80% of 12 h; of 30 h
    assert resume.plan_epochs(hour, 0, 12 * hour, 30 * hour, session_margin=0.2, week_share=0.3) == {
        "epochs_per_session": 9, "sessions_per_week": 1, "epochs_per_week": 7}  # 80% of 9 h
    assert resume.plan_epochs(hour, 600, 12 * hour, 30 * hour)["epochs_per_session"] == 10  # 10.8 h - 10 min
    assert resume.plan_epochs(20 * hour, 0, 12 * hour, 30 * hour)["epochs_per_week"] == 0


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
    root = Path(__file__).resolve().parents[1]
    notebook = root / "notebooks" / f"{NAME}.ipynb"
    meta = kaggle.kernel_metadata("me", "06 Kaggle commit workflow", "nb.ipynb", dataset_sources=["me/wheels"])
    with pytest.raises(ValueError, match="installs from GitHub"):
        kaggle.write_kernel_bundle(notebook, tmp_path / "online-setup", meta)
    with pytest.raises(ValueError, match="not attached"):
        kaggle.write_kernel_bundle(notebook, tmp_path / "other", meta, wheelhouse="me/other")
    kaggle.write_kernel_bundle(notebook, tmp_path / "offline", meta, wheelhouse="me/wheels")
    assert kaggle.validate_kernel_metadata(meta, tmp_path / "offline") == []
    original = json.loads(notebook.read_text())["cells"]
    bundled = json.loads((tmp_path / "offline" / "nb.ipynb").read_text())["cells"]
    changed = [i for i, (a, b) in enumerate(zip(original, bundled, strict=True)) if a != b]
    assert changed == [2] and "--find-links" in "".join(bundled[2]["source"])  # only the setup cell
    online = {**meta, "enable_internet": True}
    kaggle.write_kernel_bundle(notebook, tmp_path / "online", online)  # internet on: the copy as it is
    assert (tmp_path / "online" / "nb.ipynb").read_bytes() == notebook.read_bytes()


def test_script_saves_with_the_taught_lines():
    """The training script of step 2 defines save_checkpoint itself: the package's copy must be the same lines,
    and the final save_model runs on every process (FSDP/ZeRO-3 gather collectively), after wait_for_everyone."""
    import ast
    import inspect

    import nbformat

    nb = nbformat.read(Path(__file__).resolve().parents[1] / "notebooks" / f"{NAME}.ipynb", as_version=4)
    cell = next(c.source for c in nb.cells if c.source.startswith("%%writefile"))
    script = cell.split("\n", 1)[1]
    taught = next(node for node in ast.parse(script).body
                  if isinstance(node, ast.FunctionDef) and node.name == "save_checkpoint")
    assert ast.get_source_segment(script, taught) == inspect.getsource(resume.save_checkpoint).strip()
    assert "accelerator.save_state(str(tmp))" in ast.get_source_segment(script, taught)
    assert "freegpu" not in script  # a learner copies it into a project without the course package
    main = script[script.index("def main("):]
    final = main[main.index("accelerator.wait_for_everyone()  # every process has finished"):]
    assert "accelerator.save_model(model," in final and "is_main_process" not in final.split("save_model")[0]


def test_kaggle_commands_and_dataset_metadata():
    assert kaggle.dataset_metadata("me", "freegpu wheelhouse") == {
        "title": "freegpu wheelhouse", "id": "me/freegpu-wheelhouse", "licenses": [{"name": "CC0-1.0"}]}
    commands = kaggle.kaggle_commands("me/x-y", "bundle", "outputs")
    assert commands[0] == "kaggle kernels push -p bundle" and "kaggle kernels output me/x-y -p outputs" in commands


def test_wheelhouse_helpers():
    assert wheelhouse.project_source() == Path(__file__).resolve().parents[1]  # an editable install of this tree
    assert wheelhouse.project_source("pip") is None  # installed from an index, not a folder
    assert wheelhouse.project_source("no-such-distribution") is None


def test_rehearsal_dirs_are_kaggles_under_a_root(tmp_path):
    kaggle_batch = PlatformInfo("kaggle", True, False, "test")
    real, moved = platform_dirs(kaggle_batch), rehearsal_dirs(kaggle_batch, tmp_path)
    for field in ("input_dir", "working_dir", "scratch_dir"):
        assert getattr(moved, field) == tmp_path / getattr(real, field).relative_to("/")
    assert moved.output_budget_bytes == real.output_budget_bytes == 20 * 1000**3
    assert kaggle_dataset_dir("me/freegpu-wheelhouse") == str(real.input_dir / "freegpu-wheelhouse")


def test_course_bundles_are_valid_and_never_p100(tmp_path):
    """What `make course` writes to build/out/kaggle/ (and, if a build is there, what it wrote)."""
    root = Path(__file__).resolve().parents[1]
    notebooks = sorted((root / "notebooks").glob("*.ipynb"))
    written = kaggle.write_course_bundles(tmp_path, notebooks)
    assert [p.parent.name for p in written] == [kaggle.slugify(nb.stem) for nb in notebooks]
    built = sorted((root / "build" / "out" / "kaggle").glob("*/kernel-metadata.json"))
    for path in written + built:
        meta = json.loads(path.read_text())
        assert kaggle.validate_kernel_metadata(meta, path.parent) == [], path
        assert meta["machine_shape"] == ("TpuV5E8" if "-tpu-" in meta["id"] else "NvidiaTeslaT4")
        assert "p100" not in path.read_text().lower()
    for path in written:  # a copy of the committed notebook, outputs-free
        code_file = json.loads(path.read_text())["code_file"]
        assert (path.parent / code_file).read_bytes() == (root / "notebooks" / code_file).read_bytes()
    # The wheelhouse: the course's wheel and what the Kaggle image lacks (tests/test_image_lanes.py checks which).
    house = tmp_path / "wheelhouse"
    manifest = json.loads((house / "manifest.json").read_text())
    assert manifest["image"] == "kaggle-gpu" and manifest["files"][0]["file"] == "freegpu-0.1.0-py3-none-any.whl"
    assert sorted(p.name for p in house.iterdir()) == sorted(
        ["dataset-metadata.json", "manifest.json", *(f["file"] for f in manifest["files"])])
    assert not any(f["name"] == "torch" for f in manifest["files"])


TWO_PROCESS_SAVE = """
import sys
from pathlib import Path

import torch
from accelerate import Accelerator

from freegpu.resume import latest_checkpoint, save_checkpoint

accelerator = Accelerator(cpu=True)
model = torch.nn.Linear(4, 2)
model, optimizer = accelerator.prepare(model, torch.optim.AdamW(model.parameters()))
folder = Path(sys.argv[1])
for step in (5, 10):
    save_checkpoint(accelerator, folder, step, total_limit=1)
# One write per line: two ranks share the launcher's stdout, and print() may write its pieces separately.
name = latest_checkpoint(folder).name
sys.stdout.write(f"RANK {accelerator.process_index} OF {accelerator.num_processes} {name}\\n")
"""


def test_save_checkpoint_with_two_processes(tmp_path):
    """Kaggle's T4 x2 branch, on CPU: every rank saves into one temporary folder, the main rank publishes it."""
    import sys

    from freegpu.launch import free_port, run_launch

    script = tmp_path / "save.py"
    script.write_text(TWO_PROCESS_SAVE)
    done = run_launch([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                       "--master_port", str(free_port()), str(script), str(tmp_path / "ckpt")], timeout=180)
    assert sorted(line for line in done.stdout.splitlines() if line.startswith("RANK")) == [
        "RANK 0 OF 2 step_10", "RANK 1 OF 2 step_10"]
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["step_10"]
    files = sorted(p.name for p in (tmp_path / "ckpt" / "step_10").iterdir())
    assert files == ["model.safetensors", "optimizer.bin", "random_states_0.pkl", "random_states_1.pkl"]


def test_wheelhouse_round_trip(tmp_path, monkeypatch):
    """A project's wheel, plus a requirement fetched into a second wheelhouse, installed with --no-index."""
    import subprocess
    import sys

    project = tmp_path / "tiny"
    (project / "tinypkg").mkdir(parents=True)
    (project / "tinypkg" / "__init__.py").write_text("ANSWER = 42\n")
    (project / "pyproject.toml").write_text('[build-system]\nrequires = ["hatchling"]\nbuild-backend = '
                                            '"hatchling.build"\n[project]\nname = "tinypkg"\nversion = "1.0"\n')
    first = wheelhouse.build_wheelhouse(tmp_path / "house", project)
    assert first == ["tinypkg-1.0-py2.py3-none-any.whl"]
    monkeypatch.chdir(tmp_path)  # a relative path is a path, not a name for pip to look up on an index
    second = wheelhouse.build_wheelhouse(tmp_path / "house2", Path("tiny"), [str(tmp_path / "house" / first[0])],
                                         metadata={"title": "tiny wheels"})
    assert second == first
    assert json.loads((tmp_path / "house2" / "dataset-metadata.json").read_text()) == {"title": "tiny wheels"}
    target = tmp_path / "target"
    assert "Successfully installed tinypkg-1.0" in wheelhouse.install_offline(tmp_path / "house2", "tinypkg", target)
    found = subprocess.run([sys.executable, "-c", "import tinypkg; print(tinypkg.ANSWER, tinypkg.__file__)"],
                           env={"PYTHONPATH": str(target)}, capture_output=True, text=True, check=True).stdout
    assert found.startswith("42 " + str(target))


# ---------------------------------------------------------------- the rehearsal helpers behind notebook 06's cells

def test_error_of_names_the_error_with_relative_paths(tmp_path):
    def fail():
        raise FileNotFoundError(f"No such file: '{tmp_path}/a/b.bin'\nmore")

    assert resume.error_of(fail, tmp_path) == "FileNotFoundError: No such file: 'a/b.bin'"
    assert resume.error_of(lambda: None) is None


def test_command_lines_are_split_as_a_shell_would(tmp_path):
    import sys

    args = resume._arguments("python train.py --train_file $SCRATCH/t.st --output_dir 'a b'", {"SCRATCH": "/s"})
    assert args == [sys.executable, "train.py", "--train_file", "/s/t.st", "--output_dir", "a b"]
    assert resume.kill_at("step", 3)({"event": "step", "step": 4}) is True
    assert resume.kill_at("step", 3)({"event": "saved", "step": 4}) is False


def test_step_timing_from_reports():
    whole = [{"event": "step", "t": 10.0 + 0.5 * i, "since_launch_s": 2.0 + 0.5 * i, "step": i} for i in range(1, 5)]
    whole.append({"event": "saved", "save_s": 0.25, "t": 13.0, "step": 4})
    other = [{"event": "resumed", "t": 1.0, "since_launch_s": 1.0}, {"event": "step", "t": 2, "since_launch_s": 4.0}]
    timing = resume.step_timing([whole, other], steps_per_epoch=10, checkpointing_steps=5)
    assert timing["setup_s"] == [2.5, 4.0] and timing["median_setup_s"] == 3.25
    assert timing["median_step_ms"] == 500.0 and timing["median_save_ms"] == 250.0
    assert timing["epoch_s"] == 10 * 0.5 + 2 * 0.25


def test_attach_output_empties_the_working_folder(tmp_path):
    (tmp_path / "working" / "run" / "checkpoints" / "step_5").mkdir(parents=True)
    attached = resume.attach_output(tmp_path / "working", tmp_path / "input" / "slug")
    assert (attached / "run" / "checkpoints" / "step_5").is_dir()
    assert list((tmp_path / "working").iterdir()) == []


def test_offline_bundle_without_the_notebook_file(tmp_path, monkeypatch):
    """freegpu installed from GitHub (Colab, Kaggle): the metadata alone is written and checked."""
    monkeypatch.setattr(wheelhouse, "project_source", lambda dist="freegpu": None)
    meta = kaggle.kernel_metadata("me", "06 Kaggle commit workflow", "nb.ipynb", dataset_sources=["me/wheels"])
    written = kaggle.write_offline_bundle(tmp_path / "b", meta, "me/wheels", NAME)
    assert written == {"valid": True, "notebook_copied": False, "installs_offline": False}
    assert json.loads((tmp_path / "b" / "kernel-metadata.json").read_text()) == meta


def test_notebook_wheelhouse_falls_back_to_the_course_build(tmp_path, monkeypatch):
    root = Path(__file__).resolve().parents[1]
    project = tmp_path / "course"
    (project / "notebooks").mkdir(parents=True)
    (project / "notebooks" / f"{NAME}.ipynb").write_bytes((root / "notebooks" / f"{NAME}.ipynb").read_bytes())
    (project / "platforms").mkdir()
    (project / "platforms" / "images.toml").write_bytes((root / "platforms" / "images.toml").read_bytes())
    monkeypatch.setattr(wheelhouse, "project_source", lambda dist="freegpu": project)

    def no_index(*args, **kwargs):
        raise wheelhouse.WheelhouseError("no wheel of accelerate>=1.16 for Python 3.12: no index")

    monkeypatch.setattr(wheelhouse, "build_image_wheelhouse", no_index)
    missing = wheelhouse.notebook_wheelhouse(tmp_path / "house", NAME)
    assert missing["files"] == [] and missing["folder"] is None and "make course" in missing["origin"]
    assert wheelhouse.installs_and_imports(None, "freegpu", tmp_path / "t") is False
    built = project / "build" / "out" / "kaggle" / "wheelhouse"
    built.mkdir(parents=True)
    (built / "manifest.json").write_text(json.dumps({"files": [{"file": "x.whl"}], "total_bytes": 1}))
    found = wheelhouse.notebook_wheelhouse(tmp_path / "house", NAME)
    assert found["folder"] == built and found["files"] == [{"file": "x.whl"}] and "course build" in found["origin"]


def test_06_script_trains_resumes_and_saves_without_the_course_package(tmp_path):
    """train_resumable.py is copyable: it trains, checkpoints, resumes and saves where freegpu cannot be imported."""
    import os
    import subprocess
    import sys

    import nbformat
    import torch
    from safetensors.torch import save_file

    nb = nbformat.read(Path(__file__).resolve().parents[1] / "notebooks" / f"{NAME}.ipynb", as_version=4)
    cell = next(c.source for c in nb.cells if c.source.startswith("%%writefile"))
    (tmp_path / "train_resumable.py").write_text(cell.split("\n", 1)[1])
    generator = torch.Generator().manual_seed(0)
    save_file({"images": torch.rand(256, 64, generator=generator), "labels": torch.randint(0, 10, (256,),
               generator=generator)}, str(tmp_path / "train.safetensors"))
    hide = "import sys; sys.modules['freegpu'] = None"  # `import freegpu` raises ImportError
    run = [sys.executable, "-c", f"{hide}; import runpy; sys.argv = sys.argv[1:]; "
           "runpy.run_path(sys.argv[0], run_name='__main__')", "train_resumable.py", "--train_file",
           "train.safetensors", "--output_dir", "out", "--cpu", "--num_epochs", "2", "--checkpointing_steps", "3"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    first = subprocess.run(run, cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    checkpoints = sorted((tmp_path / "out" / "checkpoints").glob("step_*"))
    assert checkpoints, list((tmp_path / "out").rglob("*"))
    assert list((tmp_path / "out" / "final").glob("*.safetensors"))
    again = subprocess.run([*run, "--resume_from"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                           env=env)
    assert again.returncode == 0, again.stderr[-3000:]
    resumed = [json.loads(line[len("REPORT "):]) for line in again.stdout.splitlines() if line.startswith("REPORT ")]
    assert any(r.get("event") == "resumed" and r["checkpoint"] == checkpoints[-1].name for r in resumed), resumed
