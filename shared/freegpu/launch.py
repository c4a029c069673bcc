"""Start processes from a notebook so that they die with it, on ports that never collide.

Introduced in notebook 01 (its forked processes die with the kernel; its script launch runs under the guard);
notebook 06 kills and resumes runs with it.

Every command goes through a small guard process (`_guard` below, in a Python of its own). The guard becomes the
"child subreaper" of everything CMD starts (so orphans of a dying launcher are reparented to it, not to init), and
it notices when the notebook's kernel dies (Linux's parent-death signal, and a thread that watches its parent's
pid in case the signal is lost). Then, on an interrupted cell, on a timeout, and after CMD exits, every process
CMD started is ended: `torchrun`'s workers and `accelerate launch`'s children included.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .i18n import tr
from .software import redact

__all__ = ["free_port", "die_with_parent", "launched", "run_launch", "LaunchError", "LauncherBranch",
           "launcher_branch", "read_reports"]

_PR_SET_PDEATHSIG, _PR_SET_CHILD_SUBREAPER = 1, 36
_GRACE_S = 3.0
_GUARD_MAIN = "import sys; from freegpu.launch import _guard; sys.exit(_guard(int(sys.argv[1]), sys.argv[2:]))"


class LaunchError(RuntimeError):
    """A launched command failed; the message holds its exit status and the end of its stderr."""


def free_port() -> int:
    """A TCP port that nothing listens on now: give it to `notebook_launcher(use_port=...)` or `--main_process_port`,
    so that two notebooks (or two courses) on one machine never both take the default 29500."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _prctl(option: int, value: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def die_with_parent(parent_pid: int, sig: int = signal.SIGKILL) -> bool:
    """Make this process receive `sig` when its parent dies (Linux); exit at once if it is already gone.

    Call it first thing in a function that `notebook_launcher` forks, with the notebook's pid captured before the
    launch: when the kernel is killed, the forked workers die with it. In the notebook's own process (Colab's
    launcher runs the function in-process) it does nothing. Returns whether the signal was armed.
    """
    if os.getpid() == parent_pid:
        return False
    armed = _prctl(_PR_SET_PDEATHSIG, int(sig))
    if os.getppid() != parent_pid:  # the parent died before the signal was armed
        os._exit(1)
    return armed


def _kill_tree(pids: Sequence[int]) -> None:
    import psutil

    procs = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            procs.append(psutil.Process(pid))
    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.terminate()
    _, alive = psutil.wait_procs(procs, timeout=_GRACE_S)
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.kill()
    psutil.wait_procs(alive, timeout=_GRACE_S)


def _descendants() -> list[int]:
    import psutil

    return [p.pid for p in psutil.Process().children(recursive=True)]


def _end_all() -> None:
    """End every descendant, again and again until none is left (a launcher may start one while it is ended)."""
    for _ in range(5):
        pids = _descendants()
        if not pids:
            return
        _kill_tree(pids)


_WATCH_S = 0.25


def _guard(notebook: int, cmd: list[str]) -> int:
    """Run `cmd`, then end every process it left; end them all at once on SIGTERM, SIGINT or SIGHUP, or as soon as
    the notebook that started this guard is gone.

    Two ways to notice the notebook's death, so that neither is a single point of failure: the parent-death signal
    (armed by `_arm_guard`), and a thread that checks the parent's pid every quarter second (a signal can be lost:
    blocked in the mask this process inherited, or never armed where `prctl` is missing).
    """
    import psutil  # noqa: F401  (imported now, not first inside a signal handler)

    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    # Reentrant: a second signal that lands while the main thread is already ending the tree runs `end` again in
    # that same thread, on top of the first. With a plain lock it slept there forever, and the guard stayed.
    ending = threading.RLock()

    def end(code: int) -> None:
        if ending.acquire(blocking=False):  # the first of signal and watcher does it; the other waits for exit
            _end_all()
            os._exit(code)
        time.sleep(3600)

    def stop(signum, _frame):
        end(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stop)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
    if os.getppid() != notebook:  # the notebook died before the handlers were installed
        return 1

    def watch() -> None:
        while os.getppid() == notebook:
            time.sleep(_WATCH_S)
        end(128 + signal.SIGTERM)

    threading.Thread(target=watch, daemon=True).start()
    child = subprocess.Popen(cmd)
    code = child.wait()
    _end_all()  # whatever CMD started and did not wait for
    return code


def _arm_guard() -> None:  # runs in the guard process between fork and exec
    _prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM))


@contextlib.contextmanager
def launched(cmd: Sequence[str], *, cwd: Path | str | None = None, env: dict[str, str] | None = None,
             stdout=None, stderr=None) -> Iterator[subprocess.Popen]:
    """Start `cmd` under the guard and yield its `Popen`; on leaving the block, end it and all it started.

    `stdout`/`stderr` are as for `subprocess.Popen` (a file, `subprocess.PIPE`, or `None` to inherit). The
    process is in a session of its own, so a signal aimed at it never reaches the notebook.
    """
    guard = [sys.executable, "-c", _GUARD_MAIN, str(os.getpid()), *map(str, cmd)]
    proc = subprocess.Popen(guard, cwd=cwd, env=env, stdout=stdout, stderr=stderr, text=True,
                            start_new_session=True, preexec_fn=_arm_guard)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()  # the guard ends the whole tree
            try:
                proc.wait(timeout=2 * _GRACE_S + 2)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def run_launch(cmd: Sequence[str], *, timeout: float, cwd: Path | str | None = None,
               env: dict[str, str] | None = None, reports: Sequence[Path | str] = ()) -> subprocess.CompletedProcess:
    """Run `cmd` to the end under the guard and return its output; raise `LaunchError` if it fails or times out.

    The error shows the exit status and the last lines of stderr (through `software.redact`), so a failed launch
    explains itself in its cell without printing a secret. `reports`: files (relative to `cwd`) that the launched
    processes write as their last act. If the launch fails after every one of them was written during this launch,
    a process crashed while shutting down, its work done (torch 2.13 with DeepSpeed on gloo does that now and then:
    "terminate called without an active exception"): then this warns (stderr is in the result) and returns.
    """
    start, started_at = time.monotonic(), time.time()
    with launched(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise LaunchError(tr("{cmd} ran past {timeout:.0f} s and was stopped").format(
                cmd=" ".join(map(str, cmd)), timeout=timeout)) from None
    written = [Path(cwd or ".", report) for report in reports]
    if proc.returncode != 0 and written and all(p.is_file() and p.stat().st_mtime >= started_at for p in written):
        warnings.warn(tr("{cmd} wrote all its reports, then exited with status {code} while shutting down; its "
                         "results stand.").format(cmd=" ".join(map(str, cmd)), code=proc.returncode), stacklevel=2)
    elif proc.returncode != 0:
        raise LaunchError(tr("{cmd} exited with status {code} after {seconds:.1f} s; end of its stderr:\n"
                             "{stderr}").format(cmd=" ".join(map(str, cmd)), code=proc.returncode,
                                                seconds=time.monotonic() - start, stderr=redact(stderr[-3000:])))
    return subprocess.CompletedProcess(list(cmd), proc.returncode, stdout, stderr)


def _drain(stream, into: list[str]) -> threading.Thread:
    thread = threading.Thread(target=lambda: into.append(stream.read()), daemon=True)
    thread.start()
    return thread


def run_launches(commands: Mapping[str, Sequence[str]], *, timeout: float, cwd: Path | str | None = None,
                 env: dict[str, str] | None = None) -> dict[str, subprocess.CompletedProcess]:
    """Run several commands side by side, each under its guard; return their outputs by name, as `run_launch` does.

    This thread does the waiting (helper threads only read the pipes), so an interrupted cell, an error or the
    timeout ends every launch and all it started at once. Introduced in notebook 01 (two script launches).
    """
    start = time.monotonic()
    texts: dict[str, tuple[list[str], list[str]]] = {name: ([], []) for name in commands}
    with contextlib.ExitStack() as stack:
        procs = {name: stack.enter_context(launched(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                                                    stderr=subprocess.PIPE)) for name, cmd in commands.items()}
        readers = [_drain(getattr(proc, stream), texts[name][i])
                   for name, proc in procs.items() for i, stream in enumerate(("stdout", "stderr"))]
        for name, proc in procs.items():
            try:
                proc.wait(timeout=max(0.0, timeout - (time.monotonic() - start)))
            except subprocess.TimeoutExpired:
                raise LaunchError(tr("{name}: {cmd} ran past {timeout:.0f} s and was stopped, with every other "
                                     "launch").format(name=name, cmd=" ".join(map(str, commands[name])),
                                                      timeout=timeout)) from None
        for reader in readers:
            reader.join(_GRACE_S)
    done = {name: subprocess.CompletedProcess(list(commands[name]), procs[name].returncode, "".join(texts[name][0]),
                                              "".join(texts[name][1])) for name in commands}
    for name, result in done.items():
        if result.returncode != 0:
            raise LaunchError(tr("{name}: {cmd} exited with status {code} after {seconds:.1f} s; end of its "
                                 "stderr:\n{stderr}").format(name=name, cmd=" ".join(map(str, commands[name])),
                                                             code=result.returncode,
                                                             seconds=time.monotonic() - start,
                                                             stderr=redact(result.stderr[-3000:])))
    return done


@dataclass(frozen=True)
class LauncherBranch:
    """The branch `accelerate.notebook_launcher` (1.16) takes on this machine, found before launching."""

    name: str  # "tpu" | "colab_in_process" | "multi_gpu" | "multi_cpu" | "single_process"
    processes: int  # how many processes will run the function (0: one per TPU chip, chosen by torch_xla)
    in_process: bool  # the function runs in the notebook's own process: no fork, nothing distributed


def _ipython_shell() -> str:
    ipython = sys.modules.get("IPython")
    return str(ipython.get_ipython()) if ipython is not None else ""


def launcher_branch(num_processes: int, gpu_count: int, environ: Mapping[str, str] | None = None,
                    shell: str | None = None) -> LauncherBranch:
    """Which of its branches `notebook_launcher(fn, num_processes=...)` will take, decided as Accelerate 1.16 does.

    `gpu_count` comes from `nvidia-smi` (`len(detect_hardware().gpus)`), so asking never touches CUDA. `environ` and
    `shell` (the text of `get_ipython()`) default to this process's; pass them to see another platform's branch.
    On a TPU VM (TPU_ACCELERATOR_TYPE set, as `freegpu.hardware` reads it) PJRT_DEVICE may be unset when you ask:
    `import accelerate` imports torch_xla, which sets PJRT_DEVICE=TPU when it finds the chips
    (torch_xla/runtime.py, `_maybe_select_default_device`), before `notebook_launcher` reads it. With
    USE_TORCH_XLA=0 (notebook 01) Accelerate does not import torch_xla, so "tpu" is the cautious answer there:
    notebook 01 launches nothing on a TPU either way. Introduced in notebook 01.
    """
    env = os.environ if environ is None else environ
    shell = _ipython_shell() if shell is None else shell
    in_kaggle = any(key.startswith("KAGGLE") for key in env)  # any variable at all: the launcher's own test
    in_colab = not in_kaggle and "google.colab" in shell
    pjrt = env.get("PJRT_DEVICE", "TPU" if env.get("TPU_ACCELERATOR_TYPE") else "")
    if (in_colab or in_kaggle) and (env.get("TPU_NAME") is not None or pjrt == "TPU"):
        return LauncherBranch("tpu", 0, False)  # xmp.spawn: one process per chip, each its own Accelerator
    if in_colab and gpu_count < 2:
        return LauncherBranch("colab_in_process", 1, True)  # num_processes ignored: the function runs once, here
    if num_processes > 1 and gpu_count > 0:
        return LauncherBranch("multi_gpu", num_processes, False)  # NCCL, if the kernel has not touched CUDA
    if num_processes > 1:
        # gloo (MULTI_CPU) only with Accelerator(cpu=True) or ACCELERATE_USE_CPU=1 in each process: accelerate/state.py
        # sets cpu=True from ACCELERATE_USE_CPU; _prepare_backend picks XLA before it reads cpu, and MPI over gloo
        # where torch was built with it (pinned by tests/package/test_tpu_facts.py, test_checks_launch.py)
        return LauncherBranch("multi_cpu", num_processes, False)
    return LauncherBranch("single_process", 1, True)


def read_reports(report_dir: Path | str, expected: int, launcher_log: str = "") -> list[dict]:
    """The `rank_*.json` files that the launched processes wrote, sorted by name; fail if fewer than `expected`.

    Launched processes report through files, never through parsed stdout: a report is there or it is not. When one
    is missing, the error shows the end of the launcher's log (its stderr), so the cell that launched explains why.
    """
    paths = sorted(Path(report_dir).glob("rank_*.json"))
    if len(paths) < expected:
        raise LaunchError(tr("{found} report(s) in {report_dir}, expected {expected}; end of the launcher's "
                             "log:\n{log}").format(found=len(paths), report_dir=report_dir, expected=expected,
                                                   log=redact(launcher_log[-3000:]) or tr("(empty)")))
    return [json.loads(p.read_text()) for p in paths]
