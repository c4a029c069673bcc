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
from freegpu.measure import captured_native_stderr, python_overhead

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
    assert branch.description  # the sentence the notebook prints


def test_branch_descriptions_say_what_happens():
    colab = launcher_branch(2, 0, environ={}, shell=COLAB_SHELL)
    assert "ignores num_processes=2" in colab.description and "own process" in colab.description
    assert "one GPU" in launcher_branch(2, 1, environ={}, shell=COLAB_SHELL).description
    assert "cpu=True" in launcher_branch(2, 0, environ={}, shell="").description
    description = launcher_branch(2, 2, environ={"KAGGLE_X": "1"}, shell="").description
    assert "NCCL" in description and "not touched CUDA" in description
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


def test_python_overhead_names_the_extra_functions():
    import inspect

    def plain(n):
        return sum(range(n))

    def wrapped(n):
        inspect.signature(plain)  # the kind of Python a wrapper adds on every step
        return sum(range(n))

    found = python_overhead(lambda: [plain(10) for _ in range(200)], lambda: [wrapped(10) for _ in range(200)],
                            steps=200, top=3)
    assert found[0]["function"] == "inspect:signature" and found[0]["us_per_step"] > 0
    assert all("sum" not in f["function"] for f in found)  # called by both: the real work, not overhead
    # inspect.signature is the only outermost extra function: the whole profiled extra, nested ones a part of it.
    assert found[0]["share"] == 1.0 and all(0 <= f["share"] <= 1 for f in found)
    assert found[0]["profiled_extra_us_per_step"] == pytest.approx(found[0]["us_per_step"])


def _fake_timed(extras_us, now=None, base_us=10.0):
    """A (plain, prepared) pair and a clock that only the calls move (`now`, shared between pairs): plain takes
    `base_us`, prepared that plus the next of `extras_us` (the warm-up call first, then each trial's calls)."""
    now = [0.0] if now is None else now
    extras = iter(extras_us)

    def plain():
        now[0] += base_us * 1e-6

    def prepared():
        now[0] += (base_us + next(extras)) * 1e-6

    return (plain, prepared), lambda: now[0], now


def test_paired_overhead_resolves_a_known_extra_and_adds_up_the_step():
    from freegpu.overhead import describe, paired_overhead

    step_pair, clock, now = _fake_timed([0.0] + [3.0] * 10)  # 10 calls in 2 trials of 5, after one warm-up
    other_pair, _, _ = _fake_timed([0.0] + [1.0] * 5 + [2.0] * 5, now)
    found = paired_overhead({"step": step_pair, "other": other_pair}, calls=10, trials=2, clock=clock)
    step, other, per_step = found["lines"]["step"], found["lines"]["other"], found["per_step"]
    assert step["median"] == pytest.approx(3.0) and step["min"] == pytest.approx(3.0) and step["resolved"]
    assert step["n"] == 2 and step["calls"] == 10 and step["plain_us"] == pytest.approx(10.0)
    assert [other["min"], other["max"]] == pytest.approx([1.0, 2.0])
    assert [per_step["min"], per_step["max"]] == pytest.approx([4.0, 5.0])  # each trial adds up its lines
    assert per_step["resolved"] and per_step["calls"] == 10
    assert describe("step", step).startswith("step: +3.0 µs per step (min 3.0, max 3.0 over 2 trials, 10 calls")


def test_paired_overhead_says_when_the_spread_includes_zero():
    from freegpu.overhead import describe, paired_overhead

    pair, clock, _ = _fake_timed([0.0] + [2.0] * 5 + [-2.0] * 5)  # one trial slower, the other faster
    cost = paired_overhead({"zero_grad": pair}, calls=10, trials=2, clock=clock)["lines"]["zero_grad"]
    assert not cost["resolved"] and cost["min"] < 0 < cost["max"]
    line = describe("zero_grad", cost)
    assert line.startswith("zero_grad: not resolved on this machine") and "µs per step" not in line


def test_paired_overhead_gives_a_slow_line_fewer_calls_within_its_budget():
    from freegpu.overhead import paired_overhead

    fast, clock, now = _fake_timed([0.0] + [1.0] * 10)
    slow, _, _ = _fake_timed([0.0] + [1.0] * 10, now, base_us=1e6)  # a second a side, as with a huge batch
    found = paired_overhead({"fast": fast, "slow": slow}, calls=10, trials=2, budget_s=8.0, clock=clock)
    # Each line's share: 8 s / 2 lines / 2 trials = 2 s a trial; a slow pair takes 2 s: one call a trial.
    assert found["lines"]["fast"]["calls"] == 10 and found["lines"]["slow"]["calls"] == 2
    assert found["per_step"]["calls"] == 2 and found["lines"]["slow"]["median"] == pytest.approx(1.0)


def test_paired_overhead_on_real_time_finds_a_busy_wait():
    import time

    from freegpu.overhead import paired_overhead

    def busy(seconds):
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass

    cost = paired_overhead({"wait": (lambda: None, lambda: busy(200e-6))}, calls=200, trials=4)["lines"]["wait"]
    assert cost["resolved"] and cost["min"] >= 190 and cost["calls"] == 200


def test_overhead_helpers_endless_one_side_one_thread():
    import torch

    from freegpu.overhead import endless, one_side, one_thread

    batches = endless([1, 2, 3])
    assert [next(batches) for _ in range(7)] == [1, 2, 3, 1, 2, 3, 1]  # epoch after epoch, not a cached copy
    calls = []
    one_side({"a": (lambda: calls.append("plain a"), lambda: calls.append("prepared a")),
              "b": (lambda: calls.append("plain b"), lambda: calls.append("prepared b"))}, side=1, steps=2)
    assert calls == ["prepared a", "prepared a", "prepared b", "prepared b"]
    threads = torch.get_num_threads()
    with pytest.raises(RuntimeError), one_thread():
        assert torch.get_num_threads() == 1
        raise RuntimeError
    assert torch.get_num_threads() == threads


def test_captured_native_stderr_keeps_the_profiler_log_out_of_the_output(capfd):
    import torch

    lines = []
    with captured_native_stderr(lines), torch.profiler.profile():
        os.write(2, b"native line\n")
        torch.ones(3).sqrt()
    assert "native line" in lines
    assert capfd.readouterr().err == ""  # nothing reached the real stderr
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "after\n"  # and file descriptor 2 is back


def _notebook_01():
    import nbformat
    from conftest import NOTEBOOK_DIR

    return nbformat.read(NOTEBOOK_DIR / "01_mnist_migration.ipynb", as_version=4)


def _script_01() -> str:
    """The text of notebook 01's `%%writefile` script, train_mnist.py."""
    cell = next(c.source for c in _notebook_01().cells if c.source.startswith("%%writefile"))
    return cell.split("\n", 1)[1]


def test_notebook_01_script_holds_the_taught_loops():
    """The script carries its own copies of the loops; they must be the very lines notebook 01 teaches."""
    nb, script = _notebook_01(), _script_01()
    for name in ("train_accelerate", "evaluate_accelerate"):
        taught = next(c.source for c in nb.cells if c.source.startswith(f"def {name}("))
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
        monkeypatch.delenv(key)
    out = tmp_path / "out"
    papermill.execute_notebook(str(NOTEBOOK_DIR / "01_mnist_migration.ipynb"), str(tmp_path / "executed.ipynb"),
                               parameters={"profile": "smoke", "output_dir": str(out), "timing_trials": 2,
                                           "timing_calls": 200},
                               kernel_name="python3", cwd=str(tmp_path), progress_bar=False)
    results = json.loads((out / "results.json").read_text())
    assert results["launcher_branch"] == "colab_in_process" and results["launcher_branch_processes"] == 1
    assert "in this notebook's own process" in results["launcher_branch_description"]
    assert results["launcher_in_process_ran_in_kernel"] is True and results["launcher_in_process_world_size"] == 1
    assert results["kernel_threads_unchanged"] is True
    assert "launcher_trap_independent_runs" not in results  # the trap needs forked CPU processes
    assert results["ddp_launched_by"].startswith("torchrun") and results["ddp_num_processes"] == 2
    assert results["ddp_distributed_type"] == "MULTI_CPU" and results["model_files"] == ["model.safetensors"]
    assert results["eval_accuracy_reloaded"] == results["eval_accuracy"]
    text = (tmp_path / "executed.ipynb").read_text()
    assert "Launching training on one CPU." in text  # Accelerate's own words: it took the Colab branch
    assert "ignores num_processes=2" in text and "the function ran in this notebook's process: True" in text


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
    import papermill
    from conftest import NOTEBOOK_DIR

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(FAKE_NVIDIA_SMI)
    (bin_dir / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    out = tmp_path / "out"
    papermill.execute_notebook(str(NOTEBOOK_DIR / "01_mnist_migration.ipynb"), str(tmp_path / "executed.ipynb"),
                               parameters={"profile": "smoke", "output_dir": str(out), "timing_trials": 2,
                                           "timing_calls": 200},
                               kernel_name="python3", cwd=str(tmp_path), progress_bar=False)
    results = json.loads((out / "results.json").read_text())
    assert results["device"] == "cuda"  # what the notebook detected from nvidia-smi
    assert results["launcher_branch"] == "multi_gpu" and "NCCL" in results["launcher_branch_description"]
    assert results["ddp_launched_by"].startswith("notebook_launcher")
    assert "launcher_trap_independent_runs" not in results  # the CPU trap does not apply here
    text = (tmp_path / "executed.ipynb").read_text()
    assert "branch: multi_gpu" in text and "Launching training on 2 CPUs." in text  # CPU torch: no CUDA here
