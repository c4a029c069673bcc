"""Notebook 00's parameters and their allowed values."""

from __future__ import annotations

from typing import Any

from ..checks import check_bool, check_choice
from ..profile import PROFILES

NAMES = ("profile", "output_dir", "check_internet")


def check(p: dict[str, Any]) -> None:
    check_choice("profile", p["profile"], PROFILES)
    check_bool("check_internet", p["check_internet"])
