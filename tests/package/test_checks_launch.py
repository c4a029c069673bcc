"""freegpu.checks (strict parameter checks, output folder probe), freegpu.software.redact, freegpu.launch guards."""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import psutil
import pytest
from conftest import ROOT

from freegpu import checks, launch, platform, results, software


@pytest.mark.parametrize("value", [True, 2.0, "3", None, 10**30, -1])
def test_check_int_is_strict_and_bounded(value):
    with pytest.raises((TypeError, ValueError), match=r"parameter n="):
        checks.check_int("n", value, minimum=0, maximum=100)


@pytest.mark.parametrize("value", [0, 1, "False", None])
def test_check_bool_refuses_look_alikes(value):
    with pytest.raises(TypeError, match=r"parameter flag=.* must be True or False"):
        checks.check_bool("flag", value)


@pytest.mark.parametrize("value", [math.nan, math.inf, 1e300, True, "0.1"])
def test_check_float_refuses_non_finite_and_types(value):
    with pytest.raises((TypeError, ValueError), match=r"parameter lr="):
        checks.check_float("lr", value, minimum=0.0, maximum=1.0)


def test_check_choice_compares_types_and_seed_range():
    with pytest.raises(ValueError, match=r"parameter x=0 is not allowed"):
        checks.check_choice("x", 0, (False, True))
    assert checks.check_seed("seed", 2**32 - 1) == 2**32 - 1
    with pytest.raises(ValueError, match=r"parameter seed=99999999999999999999 is out of range; allowed: \[0, "):
        checks.check_seed("seed", 99999999999999999999)


def test_resource_estimates_are_refused_before_allocating(tmp_path):
    with pytest.raises(ValueError, match=r"parameter rows=10 needs about 2.00 GiB for rows"):
        checks.check_fits_memory("rows", 10, 2 * 1024**3, what="rows", budget_bytes=2 * 1024**3)
    assert checks.check_fits_memory("rows", 10, 1024, what="rows") == 10
    with pytest.raises(ValueError, match=r"parameter rows=5 needs about .* GiB of disk"):
        checks.check_fits_disk("rows", 5, 10**18, tmp_path / "not" / "yet", what="a file")
    with pytest.raises(ValueError, match=r"parameter n=7 would take about 700 s"):
        checks.check_fits_time("n", 7, 700.0, what="work", limit_s=600)


def _refusal(output_dir, notebook="01_mnist_migration") -> str:
    with pytest.raises((TypeError, ValueError)) as info:
        checks.check_output_dir(output_dir, notebook)
    assert "output_dir" in str(info.value)
    return str(info.value)


def test_output_dir_probe(tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    assert "is a file" in _refusal(str(a_file))
    assert "cannot create or write" in _refusal(str(a_file / "below"))
    assert "cannot create or write" in _refusal("/proc/freegpu-cannot-exist")
    assert "read-only" in _refusal("/kaggle/input/some-dataset")
    assert "must be a string" in _refusal(7)
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    assert "no course run wrote" in _refusal(str(foreign))
    # 00 and 04 into one folder: the second is refused, 00's results stay.
    shared = checks.check_output_dir(str(tmp_path / "shared"), "00_environment_check")
    results.start_run("00_environment_check", "smoke", "script", "cpu", shared).save()
    assert "holds the run of notebook '00_environment_check'" in _refusal(str(shared), "04_tpu_data_loaders")
    assert checks.check_output_dir(str(shared), "00_environment_check") == shared  # its own rerun is fine


def test_run_marker_says_incomplete_until_results_are_written(tmp_path):
    out = checks.check_output_dir(str(tmp_path / "out"), "01_mnist_migration")
    run = results.start_run("01_mnist_migration", "smoke", "script", "cpu", out, {"seed": 1})
    (out / "model.bin").write_bytes(b"x")
    assert checks.read_marker(out)["state"] == "running" and not (out / "results.json").exists()
    (out / "private").mkdir(mode=0o700)
    (out / "private" / "weights.safetensors").touch(mode=0o600)  # what safetensors and mkstemp write
    path = run.save()
    assert checks.read_marker(out)["state"] == "complete"
    readable = results.umask_mode(0o444)
    assert all(p.stat().st_mode & readable == readable for p in [out, *out.rglob("*")])
    mode = results.umask_mode()
    assert all(p.stat().st_mode & 0o777 == mode for p in (path, out / checks.RUN_MARKER))
    results.start_run("01_mnist_migration", "smoke", "script", "cpu", out)  # the next run starts clean
    assert sorted(p.name for p in out.iterdir()) == [checks.RUN_MARKER]


def test_live_run_elsewhere_is_refused(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        (out / checks.RUN_MARKER).write_text(json.dumps({
            "notebook": "01_mnist_migration", "state": "running", "pid": sleeper.pid, "host": socket.gethostname()}))
        assert f"pid {sleeper.pid}" in _refusal(str(out))
    finally:
        sleeper.kill()
        sleeper.wait()
    assert checks.check_output_dir(str(out), "01_mnist_migration") == out.resolve()  # dead run: reusable


def test_copied_platform_variables_create_no_platform_folder(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KAGGLE_KERNEL_RUN_TYPE", "Batch")
    monkeypatch.setenv("COLAB_RELEASE_TAG", "release-colab-copied")
    info = platform.detect_platform()
    kaggle_root = platform.platform_dirs(platform.detect_platform({"KAGGLE_KERNEL_RUN_TYPE": "Batch"})).input_dir
    if kaggle_root.parent.exists():
        pytest.skip("this machine is Kaggle")
    assert info.name not in ("kaggle", "colab")
    out = checks.check_output_dir("", "00_environment_check", info)
    assert out == (tmp_path / "outputs" / "00_environment_check").resolve()
    assert not kaggle_root.parent.exists()


# --- software.redact: one function for everything printed about the environment -------------------------------

PLANTED = {"KAGGLE_KEY": "k4ggle-planted-key", "HF_SIGNING_KEY": "signing-planted", "KAGGLE_CREDS": "creds-planted",
           "NOTHING_SUSPICIOUS": "plain-planted-value", "HF_TOKEN": "hf_" + "p" * 34, "SHORT_TOKEN": "abc"}


def test_environment_signals_show_only_the_allow_list():
    env = {**PLANTED, "PJRT_DEVICE": "TPU", "OMP_NUM_THREADS": "2", "KAGGLE_USERNAME": "me", "HOME": "/root"}
    signals = software.environment_signals(env)
    assert signals["PJRT_DEVICE"] == "TPU" and signals["OMP_NUM_THREADS"] == "2"
    for name in ("KAGGLE_KEY", "HF_SIGNING_KEY", "KAGGLE_CREDS", "HF_TOKEN", "KAGGLE_USERNAME", "SHORT_TOKEN"):
        assert signals[name] == software.REDACTED, name
    assert "HOME" not in signals and "NOTHING_SUSPICIOUS" not in signals
    assert all(value == software.REDACTED or name in software.SHOWN_NAMES for name, value in signals.items())


def test_redact_text_urls_and_token_files(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_TOKEN_PATH", str(tmp_path / "token"))
    (tmp_path / "token").write_text("hf_fileplantedtoken\n")
    text = (" ".join(PLANTED.values()) + " https://robot:url-planted-pw@example.invalid/x git+https://tok3n@h.io"
            " hf_fileplantedtoken python 3.12.3 on cpu")
    redacted = software.redact(text, {**PLANTED, "PYTHON_VERSION": "3.12.3", "ACCELERATE_USE_CPU": "cpu"})
    for secret in [*PLANTED.values(), "url-planted-pw", "robot", "tok3n", "hf_fileplantedtoken"]:
        assert secret not in redacted, secret
    assert "python 3.12.3 on cpu" in redacted  # versions and allow-listed values stay readable
    assert "https://[redacted]@example.invalid/x" in redacted
    html = results.markdown_table({"HF_TOKEN": software.REDACTED})
    assert "[redacted]" in html and "<" not in html  # survives markdown and HTML: not an empty tag


# --- freegpu.launch: launched processes die with the notebook; free ports -------------------------------------


def test_free_ports_differ_and_are_free():
    ports = {launch.free_port() for _ in range(5)}
    assert len(ports) > 1
    for port in ports:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


_TREE = ("import subprocess, sys, time; "
         "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); time.sleep(120)")


def _tree_of(guard_pid: int, expected: int) -> list[psutil.Process]:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        procs = psutil.Process(guard_pid).children(recursive=True)
        if len(procs) >= expected:
            return procs
        time.sleep(0.05)
    raise AssertionError("the launched tree never started")


def _all_gone(procs: list[psutil.Process], within: float = 10.0) -> bool:
    _, alive = psutil.wait_procs(procs, timeout=within)
    return not alive


def test_leaving_the_block_ends_the_whole_tree():
    with pytest.raises(KeyboardInterrupt):
        with launch.launched([sys.executable, "-c", _TREE]) as proc:
            tree = _tree_of(proc.pid, 2)
            raise KeyboardInterrupt  # an interrupted cell
    assert _all_gone(tree)


_HOW_LAUNCHED = {
    # as a notebook does: the guard armed with the parent-death signal
    "armed": f"with launched([sys.executable, '-c', {_TREE!r}]) as proc:\n",
    # the parent-death signal blocked in the mask the guard inherits: the guard unblocks it
    "blocked": "import signal\nsignal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})\n"
               f"with launched([sys.executable, '-c', {_TREE!r}]) as proc:\n",
    # never armed (a platform without prctl): the guard's watcher sees its parent gone
    "unarmed": "import subprocess\nfrom freegpu.launch import _GUARD_MAIN\n"
               "with subprocess.Popen([sys.executable, '-c', _GUARD_MAIN, str(os.getpid()), sys.executable, '-c', "
               f"{_TREE!r}], start_new_session=True) as proc:\n",
}


@pytest.mark.parametrize("how", sorted(_HOW_LAUNCHED))
def test_killed_parent_takes_the_tree_with_it(tmp_path, how):
    """SIGKILL the process that launched (the kernel, here a stand-in): everything it launched is gone soon after,
    also when the parent-death signal is blocked or was never armed."""
    script = tmp_path / "kernel.py"
    script.write_text("import os, sys, time\nfrom freegpu.launch import launched\n" + _HOW_LAUNCHED[how]
                      + "    print(proc.pid, flush=True)\n    time.sleep(120)\n")
    kernel = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    guard = int(kernel.stdout.readline())
    tree = [psutil.Process(guard), *_tree_of(guard, 2)]
    kernel.send_signal(signal.SIGKILL)
    kernel.wait()
    assert _all_gone(tree)


def test_run_launch_reports_failure_with_stderr():
    with pytest.raises(launch.LaunchError, match=r"status 3 .*\n.*boom"):
        launch.run_launch([sys.executable, "-c", "import sys; sys.stderr.write('boom'); sys.exit(3)"], timeout=30)
    with pytest.raises(launch.LaunchError, match="ran past"):
        launch.run_launch([sys.executable, "-c", "import time; time.sleep(30)"], timeout=1)
    assert launch.run_launch([sys.executable, "-c", "print('ok')"], timeout=30).stdout.strip() == "ok"


def test_die_with_parent_does_nothing_in_the_parent():
    assert launch.die_with_parent(os.getpid()) is False


def test_launch_errors_are_redacted(monkeypatch):
    monkeypatch.setenv("LAUNCH_PLANTED_CREDS", "launch-planted-secret-5150")
    script = "import os, sys; sys.stderr.write(os.environ['LAUNCH_PLANTED_CREDS']); sys.exit(1)"
    with pytest.raises(launch.LaunchError) as info:
        launch.run_launch([sys.executable, "-c", script], timeout=30)
    assert "launch-planted-secret-5150" not in str(info.value) and software.REDACTED in str(info.value)


def test_two_runs_starting_at_once_in_one_folder(tmp_path):
    """00 and 04 pass their checks on one empty folder at the same moment: one claims it, the other is refused,
    and a run whose folder was taken over never writes results.json over the other's."""
    out = checks.check_output_dir(str(tmp_path / "out"), "00_environment_check")
    assert checks.check_output_dir(str(out), "04_tpu_data_loaders") == out  # both checks pass: still empty
    first = results.start_run("00_environment_check", "smoke", "script", "cpu", out)
    with pytest.raises(ValueError, match="belongs to notebook '00_environment_check'"):
        results.start_run("04_tpu_data_loaders", "smoke", "script", "cpu", out)
    (out / checks.RUN_MARKER).unlink()
    (out / checks.RUN_MARKER).touch()  # the instant between another run's claim and its marker's content
    with pytest.raises(ValueError, match="claimed by another run a moment ago"):
        results.start_run("04_tpu_data_loaders", "smoke", "script", "cpu", out)
    assert "claiming it right now" in _refusal(str(out), "04_tpu_data_loaders")
    with pytest.raises(RuntimeError, match="claimed by another run since this one started"):
        first.save()
    assert not (out / "results.json").exists()


def test_run_launches_side_by_side_and_interrupted(tmp_path):
    done = launch.run_launches({"a": [sys.executable, "-c", "print('A')"], "b": [sys.executable, "-c", "print('B')"]},
                               timeout=60)
    assert {name: r.stdout.strip() for name, r in done.items()} == {"a": "A", "b": "B"}
    with pytest.raises(launch.LaunchError, match=r"b: .* exited with status 2"):
        launch.run_launches({"a": [sys.executable, "-c", "pass"], "b": [sys.executable, "-c", "exit(2)"]}, timeout=60)
    seen: list[psutil.Process] = []

    def interrupt_when_running():  # what Jupyter's stop button does: SIGINT to the kernel, mid-cell
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(seen) < 6:
            seen[:] = psutil.Process().children(recursive=True)
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt_when_running, daemon=True).start()
    # Jupyter's SIGINT raises KeyboardInterrupt, or torch's SignalException once an in-process launch (e.g.
    # notebook_launcher on CPU, earlier in this kernel or this pytest process) has installed torch elastic's
    # handler. Either way the cell stops, and every launch with all it started must be gone.
    with pytest.raises(BaseException) as info:
        launch.run_launches({"a": [sys.executable, "-c", _TREE], "b": [sys.executable, "-c", _TREE]}, timeout=120)
    assert type(info.value).__name__ in ("KeyboardInterrupt", "SignalException"), repr(info.value)
    assert len(seen) >= 6 and _all_gone(seen)


def test_check_parameters_names_the_bad_value_and_returns_the_folder(tmp_path):
    from freegpu.params import check_parameters, rules_of

    good = {"profile": "smoke", "output_dir": str(tmp_path / "out"), "data_dir": "", "seed": 42, "num_epochs": 5,
            "batch_size": 64, "learning_rate": 0.003, "hidden_size": 128, "num_processes": 2}
    assert tuple(good) == rules_of("01_mnist_migration").NAMES
    parameters, out = check_parameters("01_mnist_migration", {**good, "unrelated": object()})
    assert parameters == good and out == tmp_path / "out" and out.is_dir()
    with pytest.raises(ValueError, match=r"num_epochs=0.*1.*20"):
        check_parameters("01_mnist_migration", {**good, "num_epochs": 0})
    with pytest.raises(NameError, match="num_processes not defined: run the parameters cell"):
        check_parameters("01_mnist_migration", {k: v for k, v in good.items() if k != "num_processes"})
    with pytest.raises(ValueError, match=r"language='fr' is not one of \('en', 'zh'\)"):
        check_parameters("01_mnist_migration", good, language="fr")
    with pytest.raises(ValueError, match="not named like"):
        rules_of("mnist")


def test_multi_cpu_description_names_every_way_to_a_cpu_group():
    """Issue 26 (maintainer items 16, 38): cpu=True or ACCELERATE_USE_CPU=1 make a MULTI_CPU group, MPI where torch
    has it, and nothing of the sort where torch_xla imports (Accelerate picks XLA first), as accelerate/state.py
    decides."""
    import inspect

    from accelerate import state

    backend = inspect.getsource(state.PartialState._prepare_backend)
    assert 'if backend in (None, "mpi") and torch.distributed.is_mpi_available():' in backend
    assert backend.index("is_torch_xla_available()") < backend.index("DistributedType.MULTI_CPU")
    assert 'parse_flag_from_env("ACCELERATE_USE_CPU")' in inspect.getsource(state.AcceleratorState.__init__)
    assert launch.launcher_branch(2, 0, environ={}, shell="").name == "multi_cpu"


def test_launcher_branch_knows_torch_xla_sets_pjrt_device_on_a_tpu_vm():
    """Maintainer item 5: on a Kaggle TPU VM without PJRT_DEVICE, importing accelerate imports torch_xla, which sets
    PJRT_DEVICE=TPU when it finds the chips, so notebook_launcher takes its TPU branch (no gloo group)."""
    vm = {"KAGGLE_KERNEL_RUN_TYPE": "Interactive", "TPU_ACCELERATOR_TYPE": "v5litepod-8"}
    assert launch.launcher_branch(2, 0, environ=vm, shell="").name == "tpu"
    assert launch.launcher_branch(2, 0, environ={**vm, "PJRT_DEVICE": "CPU"}, shell="").name == "multi_cpu"
    kaggle_cpu = {"KAGGLE_KERNEL_RUN_TYPE": "Interactive"}
    assert launch.launcher_branch(2, 0, environ=kaggle_cpu, shell="").name == "multi_cpu"
    xla_root = next(ROOT.glob(".venv-xla/lib/python3*/site-packages/torch_xla"), None)
    if xla_root is not None:  # the XLA lane's torch_xla, read where it is installed (the main lane has none)
        runtime = (xla_root / "runtime.py").read_text()
        assert "tpu.num_available_chips() > 0" in runtime and "os.environ[xenv.PJRT_DEVICE] = 'TPU'" in runtime


def test_run_launch_takes_a_crash_after_every_report_as_done_and_a_crash_before_as_a_failure(tmp_path):
    """07's DeepSpeed launches: a rank that aborts while shutting down, after its report, leaves the work done
    (a warning, and the launch returns); an abort with no fresh report fails, even when an old report is there."""
    write_then_abort = [sys.executable, "-c",
                        "import os, pathlib; pathlib.Path('r.json').write_text('{}'); os.abort()"]
    with pytest.warns(UserWarning, match="wrote all its reports"):
        done = launch.run_launch(write_then_abort, timeout=60, cwd=tmp_path, reports=["r.json"])
    assert done.returncode != 0
    abort_only = [sys.executable, "-c", "import os; os.abort()"]
    with pytest.raises(launch.LaunchError, match="exited with status"):  # r.json is from the launch before
        launch.run_launch(abort_only, timeout=60, cwd=tmp_path, reports=["r.json"])
    with pytest.raises(launch.LaunchError, match="exited with status"):
        launch.run_launch(abort_only, timeout=60, cwd=tmp_path)
