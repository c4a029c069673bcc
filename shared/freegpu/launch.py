"""Start processes from a notebook so that they die with it, on ports that never collide.

Introduced in notebook 01 (launching training scripts); notebook 06 kills and resumes runs with it.

Every command goes through a small guard process (`_guard` below, in a Python of its own). The guard becomes the
"child subreaper" of everything CMD starts (so orphans of a dying launcher are reparented to it, not to init), and
it receives a signal when the notebook's kernel dies (Linux's parent-death signal). On that signal, on an
interrupted cell, on a timeout, and after CMD exits, every process CMD started is ended: `torchrun`'s workers and
`accelerate launch`'s children included.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

__all__ = ["free_port", "die_with_parent", "launched", "run_launch", "LaunchError"]

_PR_SET_PDEATHSIG, _PR_SET_CHILD_SUBREAPER = 1, 36
_GRACE_S = 3.0
_GUARD_MAIN = "import sys; from freegpu.launch import _guard; sys.exit(_guard(sys.argv[1:]))"


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


def _guard(cmd: list[str]) -> int:
    """Run `cmd`, then end every process it left; end them all at once on SIGTERM, SIGINT or SIGHUP."""
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)

    def stop(signum, _frame):
        _kill_tree(_descendants())
        os._exit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stop)
    if os.getppid() == 1:  # the notebook died before the handlers were installed
        return 1
    child = subprocess.Popen(cmd)
    code = child.wait()
    _kill_tree(_descendants())  # whatever CMD started and did not wait for
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
    guard = [sys.executable, "-c", _GUARD_MAIN, *map(str, cmd)]
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
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run `cmd` to the end under the guard and return its output; raise `LaunchError` if it fails or times out.

    The error shows the exit status and the last lines of stderr, so a failed launch explains itself in its cell.
    """
    start = time.monotonic()
    with launched(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise LaunchError(f"{' '.join(map(str, cmd))} ran past {timeout:.0f} s and was stopped") from None
    if proc.returncode != 0:
        raise LaunchError(f"{' '.join(map(str, cmd))} exited with status {proc.returncode} after "
                          f"{time.monotonic() - start:.1f} s; end of its stderr:\n{stderr[-3000:]}")
    return subprocess.CompletedProcess(list(cmd), proc.returncode, stdout, stderr)
