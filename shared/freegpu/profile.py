"""Parameter checks and the `auto` / `smoke` / `full` profile every notebook takes.

Introduced in notebook 00. A wrong value fails in the cell right after the parameters, with a message that names
the value and what is allowed, before any work is done.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["PROFILES", "check_choice", "check_number", "resolve_profile", "require_hub"]

PROFILES = ("auto", "smoke", "full")


def check_choice(name: str, value: Any, allowed: Iterable[Any]) -> Any:
    """Return `value` if it is one of `allowed`, else raise `ValueError` naming both (notebook 00)."""
    allowed = tuple(allowed)
    if value not in allowed:
        raise ValueError(f"parameter {name}={value!r} is not allowed; choose one of: "
                         + ", ".join(repr(a) for a in allowed))
    return value


def check_number(name: str, value: Any, *, minimum: float | None = None, maximum: float | None = None,
                 integer: bool = False) -> Any:
    """Return `value` if it is a number (an `int` when `integer`) within bounds, else raise a clear error."""
    kind = int if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kind):
        raise TypeError(f"parameter {name}={value!r} must be {'an integer' if integer else 'a number'}")
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        bounds = f"[{minimum if minimum is not None else '-inf'}, {maximum if maximum is not None else 'inf'}]"
        raise ValueError(f"parameter {name}={value!r} is out of range; allowed: {bounds}")
    return value


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
