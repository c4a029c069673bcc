"""The size of a folder as a platform counts it: notebook 00's disk check and notebook 06's output budget.

Notebook 06's checkpoint helpers (`list_checkpoints`, `latest_checkpoint`, `save_checkpoint`) live in the
training script it writes, `train_resumable.py`, and the notebook imports them from there.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["dir_bytes"]


def dir_bytes(path: Path | str) -> int:
    """Bytes of all regular files under `path` (links not followed): what a Kaggle version would keep of it."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            file = Path(root) / name
            if not file.is_symlink():
                total += file.stat().st_size
    return total
