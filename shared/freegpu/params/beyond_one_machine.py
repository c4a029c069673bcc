"""Notebook 07's parameters and their allowed values."""

from __future__ import annotations

from typing import Any

from ..checks import check_choice, check_float, check_int, check_seed
from ..profile import PROFILES

NAMES = ("profile", "output_dir", "seed", "num_machines", "processes_per_machine", "launch_timeout_s")


def check(p: dict[str, Any]) -> None:
    check_choice("profile", p["profile"], PROFILES)
    check_seed("seed", p["seed"])
    check_int("num_machines", p["num_machines"], minimum=2, maximum=4)
    check_int("processes_per_machine", p["processes_per_machine"], minimum=1, maximum=4)
    check_float("launch_timeout_s", p["launch_timeout_s"], minimum=5.0, maximum=3600.0)
