"""The starters (starters/): three training set-ups a learner copies into a project, each executed here the way
`make course` executes them (build/run_course.py `execute_starters`): with papermill, in a kernel that cannot
import the course package `freegpu`, and asserted on the results file each one writes.

- colab_one_gpu: one process, `Accelerator(mixed_precision="fp16")`; on a CPU fp16 does nothing (no loss scaler).
- kaggle_t4x2: `train.py` launched by `notebook_launcher(train.main, num_processes=2)` and by
  `!accelerate launch --config_file t4x2.yaml train.py`: two CPU processes joined with gloo (MULTI_CPU) each time.
- kaggle_tpu_v5e8: in the XLA lane (`make test-xla`: torch_xla, PJRT_DEVICE=CPU) on XLA's CPU backend; in the main
  lane, where torch_xla is not installed, on the plain CPU (the same code, no XLA).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from dataclasses import asdict
from pathlib import Path

import nbformat
import pytest
import torch
from conftest import ROOT

from build import course_site, sync_notebooks
from build import run_course as runner

STARTERS = ROOT / "starters"
NAMES = ("colab_one_gpu", "kaggle_t4x2", "kaggle_tpu_v5e8")
HAVE_XLA = importlib.util.find_spec("torch_xla") is not None
GPU = torch.cuda.is_available()
LAUNCH = "!accelerate launch --config_file t4x2.yaml train.py from_script.json"


@pytest.fixture(scope="module")
def starter(tmp_path_factory):
    """`starter(name)` executes starters/<name>.ipynb once; returns its run record and its results folder."""
    out, cache = tmp_path_factory.mktemp("starters"), {}

    def run(name: str):
        if name not in cache:
            [record] = runner.execute_starters([STARTERS / f"{name}.ipynb"], out)
            print(f"{name}: {record.status} in {record.wall_s} s")
            assert record.status == "ok", f"{name} failed: {record.error}"
            cache[name] = record, out / "starters" / "results" / name
        return cache[name]

    run.out = out
    return run


def outputs(executed: Path) -> list[tuple[str, str]]:
    """(source, printed text) of every code cell of an executed notebook."""
    nb = nbformat.read(executed, as_version=4)
    return [(c.source, "".join(o.get("text", "") for o in c.outputs)) for c in nb.cells if c.cell_type == "code"]


def learned(results: dict) -> None:
    assert results["final_loss"] < 0.8 * results["first_loss"]
    assert results["eval_accuracy"] > 0.6  # the 4 classes of the toy task: a quarter to a third by chance


def test_no_starter_mentions_the_course_package():
    files = [p for p in STARTERS.rglob("*") if p.is_file() and not any(part.startswith(".") or part == "__pycache__"
                                                                       for part in p.relative_to(STARTERS).parts)]
    assert {p.name for p in files} >= {f"{n}.ipynb" for n in NAMES} | {"train.py", "t4x2.yaml"}
    assert [p.name for p in files if "freegpu" in p.read_text().lower()] == []


def test_the_starters_kernel_cannot_import_freegpu(tmp_path):
    """The probe imports what a starter may use, then freegpu, in the kernel and in a child process: both fail."""
    assert importlib.util.find_spec("freegpu") is not None  # installed here: only the rehearsal hides it
    probe = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "language": "python",
                                                              "display_name": "Python 3"}})
    probe.cells = [nbformat.v4.new_code_cell(
        "import subprocess, sys\nimport accelerate, torch\n"
        "child = subprocess.run([sys.executable, '-c', 'import freegpu'], capture_output=True, text=True)\n"
        "print('child exit', child.returncode, child.stderr.strip().splitlines()[-1])"),
        nbformat.v4.new_code_cell("import freegpu")]
    nbformat.write(probe, tmp_path / "probe.ipynb")
    [record] = runner.execute_starters([tmp_path / "probe.ipynb"], tmp_path / "out")
    assert record.status == "failed" and "ImportError" in record.error and "blocked" in record.error
    printed = "".join(text for _, text in outputs(tmp_path / "out" / record.executed))
    assert "child exit 1 ImportError: freegpu is blocked" in printed


def test_the_scripts_beside_the_t4x2_notebook_are_the_ones_it_writes():
    """starters/train.py and t4x2.yaml are for a project without notebooks: the very files the notebook writes."""
    cells = {src.split("\n", 1)[0]: src.split("\n", 1)[1] for src, _ in outputs(STARTERS / "kaggle_t4x2.ipynb")
             if src.startswith("%%writefile")}
    for name in ("train.py", "t4x2.yaml"):
        assert cells[f"%%writefile {name}"].rstrip("\n") == (STARTERS / name).read_text().rstrip("\n"), name


def test_starter_cells_are_short_and_the_launches_are_command_lines():
    for name in NAMES:
        for src, _ in outputs(STARTERS / f"{name}.ipynb"):
            body = [line for line in src.splitlines() if line.strip()]
            assert body[0].startswith("%%writefile") or len(body) <= 15, (name, body[0])
        headings = [c.source for c in nbformat.read(STARTERS / f"{name}.ipynb", as_version=4).cells
                    if c.cell_type == "markdown"]
        assert any(h.startswith("## On the real device") for h in headings), name
    assert LAUNCH in [src for src, _ in outputs(STARTERS / "kaggle_t4x2.ipynb")]


def test_colab_one_gpu(starter):
    record, folder = starter("colab_one_gpu")
    results = json.loads((folder / "results.json").read_text())
    learned(results)
    assert results["num_processes"] == 1 and results["distributed_type"] == "NO"
    assert results["mixed_precision"] == "fp16"
    assert results["device"] == ("cuda" if GPU else "cpu")
    assert results["loss_scaling"] is GPU  # fp16 is a no-op on a CPU: no GradScaler
    from safetensors.torch import load_file  # plain PyTorch loads the saved model

    model = torch.nn.Sequential(torch.nn.Linear(32, 128), torch.nn.ReLU(), torch.nn.Linear(128, 4))
    model.load_state_dict(load_file(folder / "model" / "model.safetensors"))


def test_colab_one_gpu_resumes_from_its_checkpoints(starter, tmp_path):
    """A second session: the first run's checkpoints (on Drive on Colab, under output_dir here) are found; the run
    resumes at the newest, skips the batches it had used, and ends with the first run's weights, bit for bit."""
    _, first = starter("colab_one_gpu")
    results = json.loads((first / "results.json").read_text())
    assert results["resumed_from_step"] == 0 and results["checkpoints"] == ["step_40", "step_60"]  # 72 steps, 2 kept
    _, resumed, _ = _second_session(first, tmp_path)
    assert resumed["resumed_from_step"] == 60 and resumed["checkpoints"] == ["step_40", "step_60"]


def _second_session(first: Path, tmp_path: Path, damage=lambda checkpoints: None):
    """colab_one_gpu run again on a copy of `first`'s checkpoints (what Drive keeps between sessions), after
    `damage(checkpoints)`; it must end with `first`'s weights, bit for bit. Returns the run record, its results and
    its checkpoints folder."""
    from safetensors.torch import load_file

    again = tmp_path / "starters" / "results" / "colab_one_gpu"
    shutil.copytree(first / "checkpoints", again / "checkpoints")
    damage(again / "checkpoints")
    [record] = runner.execute_starters([STARTERS / "colab_one_gpu.ipynb"], tmp_path)
    assert record.status == "ok", record.error
    a, b = (load_file(folder / "model" / "model.safetensors") for folder in (first, again))
    assert all(torch.equal(a[name], b[name]) for name in a)
    return record, json.loads((again / "results.json").read_text()), again / "checkpoints"


@pytest.mark.parametrize("damage", ["weights cut short", "random states missing"])
def test_colab_one_gpu_skips_an_incomplete_newest_checkpoint(starter, tmp_path, damage):
    """A Drive upload cut short: the newest checkpoint lacks a file, or holds part of one. The next session skips it,
    resumes from the one before, saves over it (a rename onto a folder that exists), and ends with the first run's
    weights. A missing random-state file alone would not stop `load_state`: the sizes in sizes.json do."""
    def cut(checkpoints: Path) -> None:
        newest = checkpoints / "step_60"
        if damage == "weights cut short":
            weights = newest / "model.safetensors"
            weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
        else:
            (newest / "random_states_0.pkl").unlink()

    _, first = starter("colab_one_gpu")
    record, resumed, checkpoints = _second_session(first, tmp_path, cut)
    assert resumed["resumed_from_step"] == 40 and resumed["checkpoints"] == ["step_40", "step_60"]
    printed = "".join(text for _, text in outputs(tmp_path / record.executed))
    assert "skipping step_60: incomplete" in printed
    assert (checkpoints / "step_60" / "random_states_0.pkl").exists()  # step 60 saved again, whole


@pytest.mark.skipif(GPU, reason="a GPU would run NCCL processes: this test checks the CPU rehearsal (gloo)")
def test_kaggle_t4x2_two_launches_two_processes_each(starter):
    record, folder = starter("kaggle_t4x2")
    notebook, script = (json.loads((folder / f"from_{n}.json").read_text()) for n in ("notebook", "script"))
    for results in (notebook, script):
        learned(results)
        assert results["num_processes"] == 2 and results["distributed_type"] == "MULTI_CPU"
        assert results["mixed_precision"] == "fp16" and results["loss_scaling"] is False
    # One script, one seed, two processes: the launchers change nothing of the training.
    assert abs(notebook["final_loss"] - script["final_loss"]) <= 1e-6
    assert notebook["eval_accuracy"] == script["eval_accuracy"]
    printed = outputs(starter.out / record.executed)
    assert any("notebook_launcher(train.main" in src and "Launching training on 2 CPUs." in text
               for src, text in printed)
    assert any(src == LAUNCH and "from_script.json: " in text for src, text in printed)
    # a checkpoint per epoch (both launches write the same folders): model, optimizer, RNG states of each process
    assert sorted(p.name for p in (folder / "checkpoints").iterdir()) == ["epoch_0", "epoch_1", "epoch_2"]
    assert {"model.safetensors", "optimizer.bin", "random_states_1.pkl"} <= {
        p.name for p in (folder / "checkpoints" / "epoch_2").iterdir()}


if HAVE_XLA:
    def test_kaggle_tpu_v5e8_on_xla(starter):
        """The XLA lane: torch_xla with PJRT_DEVICE=CPU, so Accelerate trains on an XLA device."""
        record, folder = starter("kaggle_tpu_v5e8")
        results = json.loads((folder / "results.json").read_text())
        learned(results)
        assert results["distributed_type"] == "XLA" and results["device"] == "xla"
        assert results["num_processes"] == 1  # one XLA CPU device; a v5e-8 gives 8
        assert (folder / "model" / "model.safetensors").is_file()
else:
    def test_kaggle_tpu_v5e8_on_the_cpu_without_torch_xla(starter):
        """The main lane has no torch_xla: the same notebook trains on the plain CPU (the XLA lane runs it on XLA)."""
        record, folder = starter("kaggle_tpu_v5e8")
        results = json.loads((folder / "results.json").read_text())
        learned(results)
        assert results["distributed_type"] == "NO" and results["device"] == "cpu"
        assert results["num_processes"] == 1 and results["mixed_precision"] == "no"
        assert (folder / "model" / "model.safetensors").is_file()


def test_the_site_shows_the_starters(starter, tmp_path):
    """`make course`'s path: the starters' runs join the summary, and the site lists them under "Starters"."""
    from test_site import fake_course, text_of  # needs the site extra, which the XLA lane does not install

    records = [starter(name)[0] for name in NAMES]
    out = fake_course(tmp_path)
    shutil.copytree(starter.out / "starters", out / "starters")
    summary = json.loads((out / "summary.json").read_text())
    summary["notebooks"] += [asdict(r) for r in records]
    (out / "summary.json").write_text(json.dumps(summary))
    course_site.build(out, repo_root=tmp_path)
    site = out / "site"
    index = (site / "index.html").read_text()
    assert "Starters" in text_of(index)
    settings = sync_notebooks.course_settings()
    for name in NAMES:
        page = (site / "starters" / f"{name}.html").read_text()
        assert f'href="starters/{name}.html"' in index
        assert f"/blob/{settings['branch']}/starters/{name}.ipynb" in page  # Open in Colab / Kaggle
        assert "On the real device" in text_of(page)
        note = " ".join(text_of(page).split()).split("Executed by this build")[1].split("See what this build")[0]
        # A starter records no profile; the T4 x2 one writes two reports, not a results.json.
        assert "None" not in note and ("device cpu" in note) is (name != "kaggle_t4x2"), note
    measured = text_of((site / "measurements.html").read_text())
    titles = [nbformat.read(STARTERS / f"{name}.ipynb", as_version=4).cells[0].source.splitlines()[0][2:]
              for name in NAMES]
    assert all(title in measured for title in titles) and "final_loss" in measured, measured[-2000:]
