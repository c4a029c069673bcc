"""Notebook 08's parameters and their allowed values."""

from __future__ import annotations

from typing import Any

from ..checks import check_choice, check_int, check_seed, check_text
from ..i18n import tr
from ..profile import PROFILES

NAMES = ("profile", "output_dir", "drive_mount", "seed", "num_epochs", "checkpointing_steps", "kill_at_step",
         "kaggle_owner")
STEPS_PER_EPOCH = 16  # the notebook's 512 examples in batches of 32


def check(p: dict[str, Any]) -> None:
    check_choice("profile", p["profile"], PROFILES)
    check_text("drive_mount", p["drive_mount"], max_length=1024)
    check_seed("seed", p["seed"])
    check_int("num_epochs", p["num_epochs"], minimum=2, maximum=20)
    steps = STEPS_PER_EPOCH * p["num_epochs"]
    check_int("checkpointing_steps", p["checkpointing_steps"], minimum=1, maximum=steps)
    # The kill must come after the first checkpoint, between two of them, before the run ends.
    check_int("kill_at_step", p["kill_at_step"], minimum=p["checkpointing_steps"] + 1, maximum=steps - 1)
    if p["kill_at_step"] % p["checkpointing_steps"] == 0:
        raise ValueError(tr("parameter kill_at_step={value!r} falls on a checkpoint; "
                            "pick a step between two").format(value=p["kill_at_step"]))
    check_text("kaggle_owner", p["kaggle_owner"], max_length=64)
