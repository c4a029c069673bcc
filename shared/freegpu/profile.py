"""The `auto` / `smoke` / `full` profile every notebook takes (its parameters are checked by `freegpu.checks`).

Introduced in notebook 00.
"""

from __future__ import annotations

from .checks import check_choice

__all__ = ["PROFILES", "resolve_profile", "require_hub"]

PROFILES = ("auto", "smoke", "full")


def resolve_profile(profile: str, device_kind: str) -> tuple[str, str]:
    """Turn `auto` into `full` (a GPU or TPU is here) or `smoke` (CPU only); return it with the reason.

    Introduced in notebook 00.
    """
    check_choice("profile", profile, PROFILES)
    if profile != "auto":
        return profile, f"profile={profile!r} was asked for"
    if device_kind in ("cuda", "tpu"):
        return "full", f"profile='auto' and a {device_kind.upper()} is present: real data, real model"
    return "smoke", "profile='auto' on a CPU-only machine: tiny offline data, seconds per notebook"


def require_hub(profile: str, internet: bool) -> None:
    """Fail fast when the full profile needs the Hugging Face Hub and the Hub cannot be reached."""
    if profile == "full" and not internet:
        raise RuntimeError(
            "profile='full' downloads data and models from the Hugging Face Hub, which is not reachable from "
            "here. Turn the internet on (Kaggle: Settings > Internet > On), or run with profile='smoke', which "
            "uses small data shipped with the installed packages."
        )
