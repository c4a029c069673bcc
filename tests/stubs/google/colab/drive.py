"""Stand-in for google.colab.drive: "Google Drive" is the local folder named by FREEGPU_STUB_DRIVE.

`mount(mountpoint)` makes `<mountpoint>/MyDrive` a link to that folder, as Colab makes it your Drive;
`flush_and_unmount()` removes the link (the files stay in the folder, as they stay on Drive).
"""

import os
from pathlib import Path

__all__ = ["flush_and_unmount", "mount"]
_mounted: list[Path] = []


def mount(mountpoint, force_remount=False, timeout_ms=120000, readonly=False):
    """Mount "Drive" at `mountpoint` (Colab refuses a mount point with a space, and so does this)."""
    if " " in str(mountpoint):
        raise ValueError("Mountpoint must not contain a space.")
    link = Path(os.path.expanduser(str(mountpoint))) / "MyDrive"
    if link.is_symlink() and not force_remount:
        return
    store = Path(os.environ["FREEGPU_STUB_DRIVE"])  # the test's folder that plays Google Drive
    store.mkdir(parents=True, exist_ok=True)
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink():
        link.unlink()
    link.symlink_to(store, target_is_directory=True)
    _mounted.append(link)


def flush_and_unmount(timeout_ms=24 * 60 * 60 * 1000):
    """Unmount: remove the link; what was written stays in the folder that plays Drive."""
    while _mounted:
        link = _mounted.pop()
        if link.is_symlink():
            link.unlink()
