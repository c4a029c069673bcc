"""Notebook 01's launches: which branch `notebook_launcher` takes on each platform, decided before launching.

The branch decision is simulated for every platform on the CPU (environment and IPython shell as each platform
has them), and checked against Accelerate's own launcher where the CPU can run it: in-process on Colab, forked
processes elsewhere.
"""

from __future__ import annotations

import json
import os

import pytest

from freegpu.launch import LaunchError, launcher_branch, read_reports

COLAB_SHELL = "<google.colab._shell.Shell object at 0x7f00>"
JUPYTER_SHELL = "<ipykernel.zmqshell.ZMQInteractiveShell object at 0x7f00>"


@pytest.mark.parametrize("environ, shell, gpus, expected", [
    ({}, COLAB_SHELL, 0, ("colab_in_process", 1, True)),  # Colab CPU
    ({}, COLAB_SHELL, 1, ("colab_in_process", 1, True)),  # Colab T4
    ({}, COLAB_SHELL, 2, ("multi_gpu", 2, False)),  # a Colab machine with two GPUs forks like anywhere else
    ({"KAGGLE_KERNEL_RUN_TYPE": "Interactive"}, JUPYTER_SHELL, 2, ("multi_gpu", 2, False)),  # Kaggle T4 x2
    ({"KAGGLE_KERNEL_RUN_TYPE": "Batch"}, "", 0, ("multi_cpu", 2, False)),  # Kaggle CPU, Save Version
    ({}, JUPYTER_SHELL, 0, ("multi_cpu", 2, False)),  # local Jupyter on a laptop
    ({}, "", 0, ("multi_cpu", 2, False)),  # papermill, nbconvert
    ({"KAGGLE_URL_BASE": "x", "PJRT_DEVICE": "TPU"}, "", 0, ("tpu", 0, False)),  # Kaggle TPU v5e-8
    ({"TPU_NAME": "local"}, COLAB_SHELL, 0, ("tpu", 0, False)),  # Colab TPU
    ({"PJRT_DEVICE": "TPU"}, JUPYTER_SHELL, 0, ("multi_cpu", 2, False)),  # a TPU VM elsewhere: no TPU branch
])
def test_branch_on_each_platform(environ, shell, gpus, expected):
    branch = launcher_branch(2, gpus, environ=environ, shell=shell)
    assert (branch.name, branch.processes, branch.in_process) == expected


def test_the_notebook_says_what_each_branch_does():
    """launcher_branch returns names and counts; what each branch does is in 01's own markdown, where its zh
    catalog translates it (the package prints no prose)."""
    markdown = "\n".join(c.source for c in _notebook_01().cells if c.cell_type == "markdown")
    for said in ("On **Colab with one GPU or a CPU**, it calls the function once, in the kernel.",
                 "it [**forks**]", "NCCL between GPUs, gloo between CPU processes", "cpu=True"):
        assert said in markdown, said
    assert launcher_branch(1, 0, environ={}, shell="").name == "single_process"


def _report(rank_dir):
    import os as os_

    from freegpu.results import write_json_atomic

    write_json_atomic(rank_dir / f"rank_{os_.environ.get('RANK', 'unset')}.json", {"pid": os_.getpid()})


@pytest.mark.parametrize("shell, processes", [(COLAB_SHELL, 1), ("", 2)])
def test_accelerate_takes_the_predicted_branch(tmp_path, monkeypatch, shell, processes):
    """Accelerate's own launcher, run for real on the CPU, does what `launcher_branch` said it would."""
    import sys
    import types

    from accelerate import notebook_launcher

    from freegpu.launch import free_port

    for key in [k for k in os.environ if k.startswith("KAGGLE")]:
        monkeypatch.delenv(key)
    fake_ipython = types.SimpleNamespace(get_ipython=lambda: shell)  # what `str(get_ipython())` shows there
    monkeypatch.setitem(sys.modules, "IPython", fake_ipython)
    branch = launcher_branch(2, 0)
    assert branch.processes == processes
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    notebook_launcher(_report, (tmp_path,), num_processes=2, use_port=str(free_port()))
    reports = read_reports(tmp_path, expected=branch.processes)
    assert len(reports) == processes
    assert (reports[0]["pid"] == os.getpid()) is branch.in_process


def test_missing_reports_fail_with_the_launcher_log(tmp_path):
    (tmp_path / "rank_0.json").write_text(json.dumps({"rank": 0}))
    assert read_reports(tmp_path, expected=1) == [{"rank": 0}]
    with pytest.raises(LaunchError, match=r"1 report\(s\).*expected 2(.|\n)*NCCL timeout"):
        read_reports(tmp_path, expected=2, launcher_log="...\nRuntimeError: NCCL timeout")


def _notebook_01():
    import nbformat
    from conftest import NOTEBOOK_DIR

    return nbformat.read(NOTEBOOK_DIR / "01_mnist_migration.ipynb", as_version=4)


def _script_01() -> str:
    """The text of notebook 01's `%%writefile` script, train_mnist.py."""
    cell = next(c.source for c in _notebook_01().cells if c.source.startswith("%%writefile"))
    return cell.split("\n", 1)[1]


def test_notebook_01_script_holds_the_taught_loops():
    """The script carries its own copies of the loops and of the report; they must be the very lines notebook 01
    teaches (the report function follows its cell's imports)."""
    nb, script = _notebook_01(), _script_01()
    for name in ("train_accelerate", "evaluate_accelerate", "write_report"):
        taught = next(c.source for c in nb.cells if f"\ndef {name}(" in f"\n{c.source}")
        taught = taught[taught.index(f"def {name}("):]
        assert f"\n{taught.strip()}\n" in script, name
    assert "freegpu" not in script


# Run a script with these modules unimportable: only torch and accelerate (and their own dependencies) remain.
HIDDEN = ("freegpu", "sklearn", "datasets", "transformers")
HIDE = f"import sys; sys.modules.update(dict.fromkeys({HIDDEN!r}))"
WITHOUT = f"{HIDE}; import runpy; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"


def test_notebook_01_script_runs_without_the_course_package(tmp_path):
    """train_mnist.py is copyable: it trains, reports and saves where freegpu cannot be imported."""
    import subprocess
    import sys

    import torch

    from freegpu.data import load_mnist

    data = load_mnist("smoke", 42)
    torch.save({"train": data.train.tensors, "eval": data.eval.tensors}, tmp_path / "digits.pt")
    (tmp_path / "train_mnist.py").write_text(_script_01())
    hidden = subprocess.run([sys.executable, "-c", f"{HIDE}; import freegpu"], capture_output=True, text=True)
    assert "ModuleNotFoundError" in hidden.stderr  # the prelude does hide the course package
    done = subprocess.run([sys.executable, "-c", WITHOUT, "train_mnist.py", "--cpu", "--data_file", "digits.pt",
                           "--num_epochs", "2", "--report_dir", ".", "--save_dir", "model"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((tmp_path / "rank_0.json").read_text())
    assert report["num_processes"] == 1 and report["distributed_type"] == "NO"
    assert report["gather_for_metrics"] == report["gather"] == len(data.eval) and report["accuracy"] > 0.8
    assert report["steps"] == 2 * -(-len(data.train) // 64)  # two epochs of batches of 64
    assert (tmp_path / "model" / "model.safetensors").is_file()


def test_accelerate_launch_cpu_starts_one_process_whatever_num_processes_says(tmp_path):
    """What notebook 01's step 5 warns of (its run no longer shows it): `accelerate launch --cpu
    --num_processes 2` runs the script once, a world of one."""
    import sys
    from pathlib import Path

    import torch

    from freegpu.data import load_mnist
    from freegpu.launch import run_launch

    data = load_mnist("smoke", 42)
    torch.save({"train": data.train.tensors, "eval": data.eval.tensors}, tmp_path / "digits.pt")
    (tmp_path / "train_mnist.py").write_text(_script_01())
    accelerate = str(Path(sys.executable).parent / "accelerate")
    run_launch([accelerate, "launch", "--cpu", "--num_processes", "2", "train_mnist.py", "--cpu", "--data_file",
                "digits.pt", "--num_epochs", "1", "--report_dir", "reports"], cwd=tmp_path, timeout=300,
               env={**os.environ, "OMP_NUM_THREADS": "1"})
    reports = read_reports(tmp_path / "reports", expected=1)
    assert [(r["process_index"], r["num_processes"], r["distributed_type"]) for r in reports] == [(0, 1, "NO")]


# Sentences that stated how a measurement came out before the run did; they must come from the run's numbers.
FIXED_OUTCOMES = ["exactly zero", "printed one report", "One curve hides the other: that is the point",
                  "Each rank now takes half", "Each process believed it was alone", "past the number of cores",
                  "where the curve flattens", "two independent runs: True"]


@pytest.mark.parametrize("name", ["00_environment_check", "01_mnist_migration", "04_tpu_data_loaders"])
def test_markdown_states_no_measured_outcome(name):
    import nbformat
    from conftest import NOTEBOOK_DIR

    nb = nbformat.read(NOTEBOOK_DIR / f"{name}.ipynb", as_version=4)
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert not [s for s in FIXED_OUTCOMES if s in markdown]


COLAB_STARTUP = '''
# Make this kernel's shell look like Colab's to `str(get_ipython())`, which is all Accelerate's launcher reads.
_shell = get_ipython()
_shell.__class__ = type("Shell", (type(_shell),), {"__module__": "google.colab._shell"})
'''


@pytest.mark.notebook
def test_01_on_colabs_branch(tmp_path, monkeypatch):
    """Notebook 01 with the shell Colab has: Accelerate's launcher really runs the function in the kernel's process;
    the notebook predicted that, said so, kept the kernel's threads, and took the two processes from the script."""
    import papermill
    from conftest import NOTEBOOK_DIR

    startup = tmp_path / "ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00-colab-shell.py").write_text(COLAB_STARTUP)
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    for key in [k for k in os.environ if k.startswith("KAGGLE")]:
        monkeypatch.delenv(key)  # and papermill, not conftest's run_once, which plants KAGGLE_KEY among its secrets
    out = tmp_path / "out"
    papermill.execute_notebook(str(NOTEBOOK_DIR / "01_mnist_migration.ipynb"), str(tmp_path / "executed.ipynb"),
                               parameters={"profile": "smoke", "output_dir": str(out)},
                               kernel_name="python3", cwd=str(tmp_path), progress_bar=False)
    results = json.loads((out / "results.json").read_text())
    assert results["launcher_branch"] == "colab_in_process" and results["launcher_branch_processes"] == 1
    assert results["launcher_branch_in_process"] is True
    assert results["launcher_ran_in_kernel"] == [True]  # one report, written by this kernel's own process
    assert results["kernel_threads_unchanged"] is True
    assert "launcher_trap_independent_runs" not in results  # the trap needs forked CPU processes
    assert results["ddp_launched_by"].startswith("torchrun") and results["ddp_num_processes"] == 2
    assert results["ddp_distributed_type"] == "MULTI_CPU" and results["model_files"] == ["model.safetensors"]
    assert results["eval_accuracy_reloaded"] == results["eval_accuracy"]
    text = (tmp_path / "executed.ipynb").read_text()
    assert "Launching training on one CPU." in text  # Accelerate's own words: it took the Colab branch
    assert "in this process: True" in text and "the function ran in this kernel: True" in text


FAKE_NVIDIA_SMI = """#!/bin/sh
# What nvidia-smi prints on Kaggle's "GPU T4 x2", for the queries the course and Accelerate make.
case "$*" in
  *count,name*) printf '2, Tesla T4\\n2, Tesla T4\\n' ;;
  *topo*) printf '\\tGPU0\\tGPU1\\nGPU0\\t X \\tPHB\\nGPU1\\tPHB\\t X \\n' ;;
  *) printf 'Tesla T4, 15360, 7.5, 550.54.15\\nTesla T4, 15360, 7.5, 550.54.15\\n' ;;
esac
"""


@pytest.mark.notebook
def test_01_decides_multi_gpu_on_two_t4s(tmp_path, monkeypatch):
    """With two GPUs in nvidia-smi (simulated: this machine has none), notebook 01 takes the multi-GPU branch:
    it says so, keeps CUDA out of the kernel for steps 1-4, and launches from the notebook with cpu=False."""
    from conftest import run_once

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(FAKE_NVIDIA_SMI)
    (bin_dir / "nvidia-smi").chmod(0o755)
    run = run_once(tmp_path, solutions=False, env={"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    record, results = run("01_mnist_migration")
    assert results["device"] == "cuda"  # what the notebook detected from nvidia-smi
    assert results["launcher_branch"] == "multi_gpu" and results["launcher_branch_in_process"] is False
    assert results["ddp_launched_by"].startswith("notebook_launcher")
    assert "launcher_trap_independent_runs" not in results  # the CPU trap does not apply here
    text = (tmp_path / record.executed).read_text()
    assert "branch: multi_gpu" in text and "Launching training on 2 CPUs." in text  # CPU torch: no CUDA here


def test_01_device_fixes_of_issue_26():
    """Step 4 asks for cpu=True only where there is no GPU (a Colab T4 trains on its GPU); the taught loops keep
    each loss on the device and read them once; exercise 3's solution trains both loops on one device, and
    asserts bit-exactness only on a CPU."""
    from conftest import NOTEBOOK_DIR

    cells = [c.source for c in _notebook_01().cells if c.cell_type == "code"]
    launch = next(src for src in cells if "ddp = launch_ddp(" in src)
    assert "launch_ddp(cpu=not hw.gpus," in launch
    for name in ("train_plain", "train_accelerate"):
        loop = next(src for src in cells if src.startswith(f"def {name}("))
        assert ".item()" not in loop and "losses.append(loss.detach())" in loop
        assert loop.rstrip().splitlines()[-1].strip().startswith("return torch.stack(losses).tolist()")
    solution = (NOTEBOOK_DIR / "solutions" / "01_mnist_migration.py").read_text()
    exercise_3 = solution.split("# %% Exercise 3")[1].split("# %% Exercise 4")[0]
    assert "Accelerator(cpu=True)" not in exercise_3 and "Accelerator()" in exercise_3
    assert "(p.cpu() - q.cpu())" in exercise_3 and 'if devices == ["cpu"]:' in exercise_3
    assert ".item())" not in exercise_3.replace(".abs().max().item()", "")
    assert "with accelerator.main_process_first():" in _script_01()  # one download of MNIST, not one per process
