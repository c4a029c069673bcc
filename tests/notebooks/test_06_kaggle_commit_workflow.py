"""Notebook 06 (Kaggle commit workflow) and its helper freegpu.resume (the Kaggle bundles: test_kaggle_bundles.py)."""

from __future__ import annotations

import json
import math
import re

import pytest
from conftest import NOTEBOOK_DIR, ROOT

from freegpu import resume
from freegpu.platform import PlatformInfo, kaggle_dataset_dirs, platform_dirs, rehearsal_dirs

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


def test_automatic_naming_fails_on_a_number_that_exists_and_loads_a_half_written_folder(tmp_path):
    """What 06 step 1 says without showing: a resumed counter hits an existing folder; a half-written newest
    checkpoint is the one `load_state()` picks (Accelerate 1.16 deletes before it writes, in place)."""
    from accelerate.utils import ProjectConfiguration

    naming = dict(project_dir=str(tmp_path), automatic_checkpoint_naming=True, total_limit=2)
    accelerator, _ = _accelerator_with_model(project_config=ProjectConfiguration(**naming))
    for _ in range(3):
        accelerator.save_state()
    resumed, _ = _accelerator_with_model(project_config=ProjectConfiguration(**naming))
    resumed.load_state()
    with pytest.raises(ValueError, match="already exists"):
        for _ in range(3):
            resumed.save_state()
    newest = max((tmp_path / "checkpoints").iterdir(), key=lambda p: int(p.name.split("_")[-1]))
    (newest / "optimizer.bin").unlink()
    with pytest.raises(FileNotFoundError, match="optimizer.bin"):
        resumed.load_state()


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
    assert r["save_fits_here"] is True and r["budget_guard_refused"] is True  # the tight cap: half a checkpoint


@pytest.mark.notebook
def test_06_time_budget_and_commit_rehearsal(notebook_run):
    _, r, out = notebook_run
    stop = r["time_budget_stop"]
    assert stop["event"] == "time_budget" and 0 < stop["step"] < 2 * r["steps_per_epoch"]
    assert stop["remaining_s"] < r["parameters"]["time_budget_s"]
    assert r["commit_resumed_from"] == stop["checkpoint"] == f"step_{stop['step']}"
    assert r["commit_max_abs_weight_diff"] == 0.0
    rehearsal = out / "rehearsal" / "kaggle"
    owner = r["parameters"]["kaggle_owner"]  # Kaggle mounts a notebook's output at notebooks/<owner>/<slug> (2026)
    attached = rehearsal / "input" / "notebooks" / owner / "06-kaggle-commit-workflow" / NAME / "train" / "checkpoints"
    assert (attached / stop["checkpoint"]).is_dir()
    # The notebook's glob finds exactly the attached checkpoints in the rehearsed input folder.
    assert sorted((rehearsal / "input").glob(f"**/{NAME}/train/checkpoints")) == [attached]
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
    notebook = NOTEBOOK_DIR / f"{NAME}.ipynb"
    setup = "".join(json.loads(notebook.read_text())["cells"][2]["source"])
    lines = r["wheelhouse_commands"]
    assert lines[0].split('"')[1] in setup and "pip install --no-index --find-links" in lines[-1]
    assert kaggle_dataset_dirs(meta["dataset_sources"][0])[0] in lines[-1]  # Kaggle's newer layout


@pytest.mark.notebook
def test_06_outputs_name_no_build_machine_path(notebook_run):
    """Paths are printed relative to the output folder (the check cell alone says where that is)."""
    import nbformat

    record, _, out = notebook_run
    nb = nbformat.read(out.parents[1] / record.executed, as_version=4)
    check = next(i for i, c in enumerate(nb.cells) if "check_parameters(NOTEBOOK" in c.source)
    root = str(ROOT)
    for cell in nb.cells[check + 1:]:
        for output in cell.get("outputs", []):
            text = output.get("text", "") + json.dumps(output.get("data", {}))
            assert str(out) not in text and root not in text, (cell.source[:80], text[:300])


# ---------------------------------------------------------------- helpers against oracles

def _accelerator_with_model(seed=0, **kwargs):
    import torch
    from accelerate import Accelerator

    accelerator = Accelerator(cpu=True, **kwargs)
    torch.manual_seed(seed)
    model = torch.nn.Linear(4, 2)
    model, optimizer = accelerator.prepare(model, torch.optim.AdamW(model.parameters()))
    return accelerator, model


def test_save_checkpoint_rotates_after_publishing(tmp_path):
    script = _script_namespace()
    accelerator, _ = _accelerator_with_model()
    for step in (10, 20, 30):
        script["save_checkpoint"](accelerator, tmp_path, step, total_limit=2)
    assert [p.name for p in script["list_checkpoints"](tmp_path)] == ["step_20", "step_30"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_20", "step_30"]  # no temp folder left


def test_a_save_that_dies_publishes_nothing(tmp_path):
    script = _script_namespace()
    save_checkpoint, latest_checkpoint = script["save_checkpoint"], script["latest_checkpoint"]
    accelerator, _ = _accelerator_with_model()
    save_checkpoint(accelerator, tmp_path, 10, total_limit=2)

    def die(tmp):
        assert (tmp / "model.safetensors").is_file()  # written, not yet published
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(accelerator, tmp_path, 20, total_limit=1, written=die)
    assert latest_checkpoint(tmp_path).name == "step_10"  # the old one is still there: nothing deleted
    assert (tmp_path / ".step_20.tmp").is_dir()
    save_checkpoint(accelerator, tmp_path, 20, total_limit=1)  # the next save clears the leftover
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_20"]


def test_latest_checkpoint_across_folders(tmp_path):
    for folder, step in (("a", 5), ("a", 30), ("b", 12), ("b", 40)):
        (tmp_path / folder / f"step_{step}").mkdir(parents=True)
    (tmp_path / "b" / ".step_50.tmp").mkdir()
    (tmp_path / "b" / "step_x").mkdir()
    script = _script_namespace()
    assert script["latest_checkpoint"](tmp_path / "a", tmp_path / "b", tmp_path / "missing").name == "step_40"
    assert script["latest_checkpoint"](tmp_path / "missing") is None
    assert [p.name for p in script["list_checkpoints"](tmp_path / "b")] == ["step_12", "step_40"]


def _script_text() -> str:
    """The text of notebook 06's training script, train_resumable.py."""
    import nbformat

    nb = nbformat.read(NOTEBOOK_DIR / f"{NAME}.ipynb", as_version=4)
    return next(c.source for c in nb.cells if c.source.startswith("%%writefile")).split("\n", 1)[1]


def _write_script_and_data(folder, samples: int) -> None:
    """train_resumable.py, and a training file of `samples` random 64-value images, into `folder`."""
    import torch
    from safetensors.torch import save_file

    (folder / "train_resumable.py").write_text(_script_text())
    generator = torch.Generator().manual_seed(0)
    save_file({"images": torch.rand(samples, 64, generator=generator),
               "labels": torch.randint(0, 10, (samples,), generator=generator)}, str(folder / "train.safetensors"))


def _reports(text: str) -> list[dict]:
    """The events of the script's `REPORT {json}` lines in `text`."""
    return [json.loads(line[len("REPORT "):]) for line in text.splitlines() if line.startswith("REPORT ")]


def _script_namespace() -> dict:
    """The functions of notebook 06's training script (its `main` does not run)."""
    namespace: dict = {"__name__": "train_resumable"}
    exec(compile(_script_text(), "train_resumable.py", "exec"), namespace)  # noqa: S102 - the notebook's own script
    return namespace


def test_loaded_checkpoint_restores_weights(tmp_path):
    accelerator, model = _accelerator_with_model(seed=0)
    saved = _script_namespace()["save_checkpoint"](accelerator, tmp_path, 3, total_limit=1)
    other, other_model = _accelerator_with_model(seed=1)
    other.load_state(str(saved))
    assert all((a == b).all() for a, b in zip(model.parameters(), other_model.parameters(), strict=True))


def test_dir_bytes(tmp_path):
    (tmp_path / "a.bin").write_bytes(b"x" * 1000)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.bin").write_bytes(b"y" * 24)
    (tmp_path / "link").symlink_to(tmp_path / "a.bin")  # not followed: counted once
    assert resume.dir_bytes(tmp_path) == 1024


def test_script_saves_with_the_taught_lines():
    """The training script of step 2 defines save_checkpoint itself (the notebook imports it from the script), and
    the final save_model runs on every process (FSDP/ZeRO-3 gather collectively), after wait_for_everyone."""
    import ast

    import nbformat

    nb = nbformat.read(NOTEBOOK_DIR / f"{NAME}.ipynb", as_version=4)
    cell = next(c.source for c in nb.cells if c.source.startswith("%%writefile"))
    script = cell.split("\n", 1)[1]
    taught = next(node for node in ast.parse(script).body
                  if isinstance(node, ast.FunctionDef) and node.name == "save_checkpoint")
    assert "accelerator.save_state(str(tmp))" in ast.get_source_segment(script, taught)
    assert "freegpu" not in script  # a learner copies it into a project without the course package
    main = script[script.index("def main("):]
    final = main[main.index("accelerator.wait_for_everyone()  # every process has finished"):]
    assert "accelerator.save_model(model," in final and "is_main_process" not in final.split("save_model")[0]


def test_rehearsal_dirs_are_kaggles_under_a_root(tmp_path):
    kaggle_batch = PlatformInfo("kaggle", True, False, "test")
    real, moved = platform_dirs(kaggle_batch), rehearsal_dirs(kaggle_batch, tmp_path)
    for field in ("input_dir", "working_dir", "scratch_dir"):
        assert getattr(moved, field) == tmp_path / getattr(real, field).relative_to("/")
    assert moved.output_budget_bytes == real.output_budget_bytes == 20 * 1000**3
    assert kaggle_dataset_dirs("me/freegpu-wheelhouse") == [str(real.input_dir / "datasets/me/freegpu-wheelhouse"),
                                                           str(real.input_dir / "freegpu-wheelhouse")]
    assert kaggle_dataset_dirs("me/x", tmp_path) == [str(tmp_path / "datasets/me/x"), str(tmp_path / "x")]


TWO_PROCESS_SAVE = """
import sys
from pathlib import Path

import torch
from accelerate import Accelerator

from train_resumable import latest_checkpoint, save_checkpoint  # notebook 06's script, beside this one

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
    (tmp_path / "train_resumable.py").write_text(_script_text())
    done = run_launch([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                       "--master_port", str(free_port()), str(script), str(tmp_path / "ckpt")], timeout=180)
    assert sorted(line for line in done.stdout.splitlines() if line.startswith("RANK")) == [
        "RANK 0 OF 2 step_10", "RANK 1 OF 2 step_10"]
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["step_10"]
    files = sorted(p.name for p in (tmp_path / "ckpt" / "step_10").iterdir())
    assert files == ["model.safetensors", "optimizer.bin", "random_states_0.pkl", "random_states_1.pkl"]


FAST_CLOCK_ON_RANK_1 = """
import os, runpy, sys, time

if os.environ["RANK"] == "1":  # this rank's clock runs twice as fast: alone, it would stop first
    real = time.monotonic
    time.monotonic = lambda: 2 * real()
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def test_time_budget_stops_every_process_at_the_same_step(tmp_path):
    """Two processes whose clocks disagree (T4 x2, each measures its own time): the rank that runs out first sets
    Accelerate's trigger, and both stop and save at the same step. Without it one would wait in the save's barrier
    while the other ran the next step's all-reduce."""
    import sys

    from freegpu.launch import free_port, run_launch

    _write_script_and_data(tmp_path, 2048)
    (tmp_path / "fast_clock.py").write_text(FAST_CLOCK_ON_RANK_1)
    logs = tmp_path / "logs"
    run_launch([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
                str(free_port()), "--log_dir", str(logs), "--redirects", "3", str(tmp_path / "fast_clock.py"),
                str(tmp_path / "train_resumable.py"), "--train_file", str(tmp_path / "train.safetensors"), "--cpu",
                "--output_dir", str(tmp_path / "out"), "--batch_size", "16", "--checkpointing_steps", "1000",
                "--time_budget_s", "1.5", "--step_sleep_s", "0.02"], timeout=180)
    stops = []
    for log in sorted(logs.rglob("stdout.log")):  # one per rank
        stops += [event["step"] for event in _reports(log.read_text()) if event["event"] == "time_budget"]
    assert len(stops) == 2 and stops[0] == stops[1], stops
    assert 0 < stops[0] < 2 * 2048 // 32  # inside the run, which would take two epochs of 64 steps
    assert sorted(p.name for p in (tmp_path / "out" / "checkpoints").iterdir()) == [f"step_{stops[0]}"]


def test_06_script_trains_resumes_and_saves_without_the_course_package(tmp_path):
    """train_resumable.py is copyable: it trains, checkpoints, resumes and saves where freegpu cannot be imported."""
    import os
    import subprocess
    import sys

    _write_script_and_data(tmp_path, 256)
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
    resumed = _reports(again.stdout)
    assert any(r.get("event") == "resumed" and r["checkpoint"] == checkpoints[-1].name for r in resumed), resumed
