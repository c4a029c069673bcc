"""The opening every notebook shares: platform, hardware, profile and output folder in one call.

Notebook 00 calls `begin` and shows what it found, step by step; notebooks 01-08 call it and teach their subject.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from .hardware import HardwareInfo, detect_hardware
from .platform import PlatformInfo, detect_platform, has_internet, resolve_output_dir
from .profile import hub_ids, require_hub, resolve_profile

__all__ = ["Setup", "begin"]


class Setup(NamedTuple):
    """What `begin` found; unpack it as `info, hw, resolved_profile, out = begin(...)`."""

    info: PlatformInfo
    hw: HardwareInfo
    profile: str
    output_dir: Path


def begin(notebook: str, profile: str, output_dir: str, sources: dict[str, str] | None = None) -> Setup:
    """Detect platform and hardware, resolve `profile`, create the output folder.

    `sources` maps the parameters that name the full profile's data or model to their values, defaults filled
    in (`{"data_dir": data_dir or "ylecun/mnist"}`). A `full` profile that reads a Hub id while the Hugging Face
    Hub is unreachable fails here, before any download starts; folders need no network.
    """
    info, hw = detect_platform(), detect_hardware()
    resolved = resolve_profile(profile, hw.device_kind)
    if resolved == "full" and hub_ids(sources or {}):
        require_hub(resolved, has_internet(), sources)
    return Setup(info, hw, resolved, resolve_output_dir(output_dir, notebook, info))
