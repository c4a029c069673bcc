"""Write a folder of files so that readers see the old one or the complete new one, never half of it.

Introduced in notebook 01 (saving right); notebook 06 builds resumable training on it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from .results import umask_mode

__all__ = ["replace_dir"]


@contextlib.contextmanager
def replace_dir(target: Path) -> Iterator[Path]:
    """Yield a fresh temporary folder beside `target`; on success it takes `target`'s place, on error it is deleted.

    Example: `with replace_dir(out / "model") as tmp: accelerator.save_model(model, tmp)`.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp"))
    os.chmod(tmp, umask_mode(0o777))  # mkdtemp makes it 0700; the saved model is for others to read too
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = target.with_name(f".{target.name}.old")
    if target.exists():
        shutil.rmtree(old, ignore_errors=True)
        os.replace(target, old)  # both renames stay on one file system, each one atomic
    os.replace(tmp, target)
    shutil.rmtree(old, ignore_errors=True)
