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
from freegpu.measure import python_overhead

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
    assert "NCCL" in launcher_branch(2, 2, environ={"KAGGLE_X": "1"}, shell="").description
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
