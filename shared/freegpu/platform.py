"""Where is this notebook running, which folders are safe to use there, and is the internet reachable?

Introduced in notebook 00 (environment check). Every path that is specific to Colab or Kaggle lives in this
module and nowhere else in the course.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "PlatformInfo",
    "PlatformDirs",
    "detect_platform",
    "platform_dirs",
    "resolve_output_dir",
    "rehearsal_dirs",
    "has_internet",
    "read_only_input",
    "kaggle_dataset_dirs",
]

# /kaggle/working is what a Kaggle "Save Version" keeps: "Up to 20 GBs of output from a Notebook may be saved to disk
# in /kaggle/working" (https://www.kaggle.com/docs/notebooks).
KAGGLE_OUTPUT_BUDGET_BYTES = 20 * 1000**3
_KAGGLE_WORKING = Path("/kaggle/working")
_KAGGLE_INPUT = Path("/kaggle/input")
_KAGGLE_TEMP = Path("/kaggle/temp")
_COLAB_CONTENT = Path("/content")
_COLAB_DRIVE = Path("/content/drive/MyDrive")
# Parent processes that run a kernel with nobody watching it.
_HEADLESS_PARENTS = ("papermill", "nbconvert", "nbclient", "pytest", "execnb")


@dataclass(frozen=True)
class PlatformInfo:
    """What `detect_platform` found.

    Args:
        name (`str`): one of `colab`, `kaggle`, `jupyter` (a local Jupyter/VS Code kernel), `headless`
            (a kernel run by papermill or nbconvert), `script` (plain Python, no kernel).
        kaggle_batch (`bool`): Kaggle "Save Version" / pushed run (`KAGGLE_KERNEL_RUN_TYPE=Batch`): nobody is
            watching, the run ends when the notebook ends, and only /kaggle/working is kept.
        interactive (`bool`): a person is at the notebook (Colab, Kaggle editor, local Jupyter).
        evidence (`str`): the signal that decided it, as a name a learner can check (`KAGGLE_KERNEL_RUN_TYPE=Batch`,
            `parent=papermill`), not a sentence.
    """

    name: str
    kaggle_batch: bool
    interactive: bool
    evidence: str

    @property
    def hosted(self) -> bool:
        return self.name in ("colab", "kaggle")


@dataclass(frozen=True)
class PlatformDirs:
    """Folders with different lifetimes on a platform.

    Args:
        input_dir (`Path`): where attached data sits (read-only on Kaggle).
        working_dir (`Path`): where outputs go by default.
        scratch_dir (`Path`): fast space that is not kept.
        working_persists (`bool`): whether `working_dir` survives the end of the session.
        output_budget_bytes (`int | None`): cap on what `working_dir` may hold, where the platform sets one.
    """

    input_dir: Path
    working_dir: Path
    scratch_dir: Path
    working_persists: bool
    output_budget_bytes: int | None


def _in_kernel() -> bool:
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return shell is not None and getattr(shell, "kernel", None) is not None


def _parent_command() -> str:
    try:
        import psutil

        return " ".join(psutil.Process(os.getppid()).cmdline()).lower()
    except Exception:  # the parent may be gone or hidden from us; then it decides nothing
        return ""


def detect_platform(environ: dict[str, str] | None = None) -> PlatformInfo:
    """Tell Colab, Kaggle (interactive or batch), local Jupyter, headless runs and plain scripts apart.

    Uses only real signals: the `google.colab` module or `COLAB_RELEASE_TAG`, `KAGGLE_KERNEL_RUN_TYPE` (each only
    where the platform's folder exists, unless `environ` is given to simulate a platform),
    `JPY_SESSION_NAME` (set by a Jupyter server for the kernels it starts) and the kernel's parent process.
    Introduced in notebook 00.
    """
    env = os.environ if environ is None else environ
    # Copied variables are not a platform: in this process's own environment, Kaggle's and Colab's variables
    # count only where their folders exist, so no /kaggle or /content is ever created on another machine.
    # A mapping passed in describes a platform to simulate, and is trusted as it is.
    real = environ is None
    if "google.colab" in sys.modules or ("COLAB_RELEASE_TAG" in env and (not real or _COLAB_CONTENT.is_dir())):
        return PlatformInfo("colab", False, True, "google.colab module / COLAB_RELEASE_TAG")
    run_type = env.get("KAGGLE_KERNEL_RUN_TYPE")
    if run_type and (not real or _KAGGLE_WORKING.parent.is_dir()):
        batch = run_type.lower() == "batch"
        return PlatformInfo("kaggle", batch, not batch, f"KAGGLE_KERNEL_RUN_TYPE={run_type}")
    if not _in_kernel():
        return PlatformInfo("script", False, False, "get_ipython()=None")
    if "JPY_SESSION_NAME" in env or "VSCODE_PID" in env:
        return PlatformInfo("jupyter", False, True, "JPY_SESSION_NAME" if "JPY_SESSION_NAME" in env else "VSCODE_PID")
    parent = _parent_command()
    hit = next((p for p in _HEADLESS_PARENTS if p in parent), None)
    return PlatformInfo("headless", False, False, f"parent={hit}" if hit else "JPY_SESSION_NAME=None")


def platform_dirs(info: PlatformInfo) -> PlatformDirs:
    """The input, working and scratch folders for a platform (introduced in notebook 00)."""
    import tempfile

    if info.name == "kaggle":
        return PlatformDirs(_KAGGLE_INPUT, _KAGGLE_WORKING, _KAGGLE_TEMP, True, KAGGLE_OUTPUT_BUDGET_BYTES)
    if info.name == "colab":
        drive = _COLAB_DRIVE.is_dir()
        return PlatformDirs(_COLAB_CONTENT, _COLAB_DRIVE / "freegpu" if drive else _COLAB_CONTENT,
                            Path(tempfile.gettempdir()), drive, None)  # /content goes with the runtime
    cwd = Path.cwd()
    return PlatformDirs(cwd, cwd / "outputs", Path(tempfile.gettempdir()), True, None)


def resolve_output_dir(output_dir: str, notebook: str, info: PlatformInfo | None = None) -> Path:
    """`output_dir` as given, or the platform's working folder plus the notebook name when it is empty.

    Creates the folder. Introduced in notebook 00.
    """
    if output_dir:
        path = Path(output_dir).expanduser()
    else:
        path = platform_dirs(info or detect_platform()).working_dir / notebook
    path.mkdir(parents=True, exist_ok=True)
    return path.resolve()


def rehearsal_dirs(info: PlatformInfo, root: Path) -> PlatformDirs:
    """The folders `platform_dirs(info)` gives on that platform, moved under `root`.

    Rehearse a Kaggle batch run's file layout (input, working, scratch) on any machine (notebook 06).
    """
    import dataclasses

    dirs = platform_dirs(info)
    moved = {f: Path(root) / getattr(dirs, f).relative_to(getattr(dirs, f).anchor)
             for f in ("input_dir", "working_dir", "scratch_dir")}
    return dataclasses.replace(dirs, **moved)


def read_only_input(path: Path) -> Path | None:
    """The read-only platform folder that `path` lies in (Kaggle's `/kaggle/input`), or `None`."""
    path = Path(path).absolute()
    return _KAGGLE_INPUT if path == _KAGGLE_INPUT or _KAGGLE_INPUT in path.parents else None


def kaggle_dataset_dirs(dataset_id: str, root: Path | str | None = None) -> list[str]:
    """Where a Kaggle kernel may find the attached dataset `owner/slug`, the newer layout first:
    `/kaggle/input/datasets/<owner>/<slug>` (the notebooks of 2026), then `/kaggle/input/<slug>` (older sessions).
    Kaggle documents neither; both are read from public notebooks. `root` moves the input folder (a rehearsal)."""
    owner, slug = dataset_id.split("/")
    root = _KAGGLE_INPUT if root is None else Path(root)
    return [str(root / "datasets" / owner / slug), str(root / slug)]


def has_internet(host: str = "huggingface.co", port: int = 443, timeout: float = 2.0) -> bool:
    """Whether a TCP connection to `host` opens within `timeout` seconds, DNS included (notebook 00, `begin`)."""
    answer: list[bool] = []

    def probe() -> None:
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=timeout):
            answer.append(True)

    thread = threading.Thread(target=probe, daemon=True)  # DNS ignores socket timeouts: stop waiting at the deadline
    thread.start()
    thread.join(timeout)
    return bool(answer)
