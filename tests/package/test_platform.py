"""freegpu.platform: each platform recognised from its real signals, simulated here."""

from __future__ import annotations

import socket
import sys
import threading
import time
import types
from pathlib import Path

import pytest

from freegpu import platform


@pytest.fixture
def kernel(monkeypatch):
    """Pretend to run inside an IPython kernel (what Jupyter, papermill and nbconvert give us)."""
    shell = types.SimpleNamespace(kernel=object())
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: shell))


def test_colab_from_module(monkeypatch):
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    info = platform.detect_platform({})
    assert info.name == "colab" and info.interactive and info.hosted


def test_colab_from_env():
    assert platform.detect_platform({"COLAB_RELEASE_TAG": "release-colab-20261120"}).name == "colab"


def test_kaggle_interactive_and_batch():
    editor = platform.detect_platform({"KAGGLE_KERNEL_RUN_TYPE": "Interactive"})
    batch = platform.detect_platform({"KAGGLE_KERNEL_RUN_TYPE": "Batch"})
    assert (editor.name, editor.kaggle_batch, editor.interactive) == ("kaggle", False, True)
    assert (batch.name, batch.kaggle_batch, batch.interactive) == ("kaggle", True, False)
    assert batch.evidence == "KAGGLE_KERNEL_RUN_TYPE=Batch"


def test_kaggle_api_token_alone_is_not_kaggle(monkeypatch):
    # notebook_launcher treats any KAGGLE* variable as Kaggle; a local API token must not fool us.
    monkeypatch.setitem(sys.modules, "IPython", None)
    assert platform.detect_platform({"KAGGLE_API_TOKEN": "x", "KAGGLE_USERNAME": "me"}).name == "script"


def test_plain_script(monkeypatch):
    monkeypatch.setitem(sys.modules, "IPython", None)
    info = platform.detect_platform({})
    assert info.name == "script" and not info.interactive


def test_local_jupyter(kernel):
    info = platform.detect_platform({"JPY_SESSION_NAME": "/home/me/notebooks/00_environment_check.ipynb"})
    assert info.name == "jupyter" and info.interactive and info.evidence == "JPY_SESSION_NAME"


def test_headless_papermill(kernel, monkeypatch):
    monkeypatch.setattr(platform, "_parent_command", lambda: "/usr/bin/python /usr/bin/papermill in.ipynb out.ipynb")
    info = platform.detect_platform({})
    assert info.name == "headless" and not info.interactive and info.evidence == "parent=papermill"


def test_kaggle_dirs():
    dirs = platform.platform_dirs(platform.detect_platform({"KAGGLE_KERNEL_RUN_TYPE": "Batch"}))
    assert dirs.input_dir == Path("/kaggle/input") and dirs.working_dir == Path("/kaggle/working")
    assert dirs.scratch_dir == Path("/kaggle/temp") and dirs.working_persists
    assert dirs.output_budget_bytes == 20 * 1000**3


def test_colab_dirs_without_drive():
    dirs = platform.platform_dirs(platform.detect_platform({"COLAB_RELEASE_TAG": "x"}))
    if Path("/content/drive/MyDrive").is_dir():
        pytest.skip("this machine has a mounted Google Drive")
    assert dirs.working_dir == Path("/content") and not dirs.working_persists


def test_resolve_output_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "IPython", None)
    default = platform.resolve_output_dir("", "00_environment_check", platform.detect_platform({}))
    assert default == tmp_path / "outputs" / "00_environment_check" and default.is_dir()
    given = platform.resolve_output_dir(str(tmp_path / "x" / "y"), "00_environment_check")
    assert given == tmp_path / "x" / "y" and given.is_dir()


def test_no_internet(monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("Network is unreachable")

    monkeypatch.setattr(socket, "create_connection", refuse)
    assert platform.has_internet() is False


def test_internet_probe_never_hangs(monkeypatch):
    released = threading.Event()

    def hang(*args, **kwargs):  # a connection that never answers, until the test ends
        released.wait(30)
        raise OSError("timed out")

    monkeypatch.setattr(socket, "create_connection", hang)
    start = time.perf_counter()
    try:
        assert platform.has_internet(timeout=0.5) is False
        assert time.perf_counter() - start < 1.5
    finally:
        released.set()  # the probe's thread ends now, not inside a later test


def test_internet_reachable(monkeypatch):
    class Connection:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: Connection())
    assert platform.has_internet() is True
