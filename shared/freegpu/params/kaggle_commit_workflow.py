"""Notebook 06's parameters and their allowed values."""

from __future__ import annotations

from typing import Any

from ..checks import check_choice, check_fits_memory, check_float, check_int, check_seed, check_source, check_text
from ..data import MNIST_HUB_ID
from ..i18n import tr
from ..profile import PROFILES

NAMES = ("profile", "output_dir", "data_dir", "seed", "num_epochs", "batch_size", "learning_rate", "hidden_size",
         "checkpointing_steps", "total_limit", "kill_at_step", "time_budget_s", "kaggle_owner")


def check(p: dict[str, Any]) -> None:
    check_choice("profile", p["profile"], PROFILES)
    check_source("data_dir", p["data_dir"], hub_default=MNIST_HUB_ID)
    check_seed("seed", p["seed"])
    check_int("num_epochs", p["num_epochs"], minimum=1, maximum=100)
    check_int("batch_size", p["batch_size"], minimum=2, maximum=2**16)
    check_float("learning_rate", p["learning_rate"], minimum=1e-6, maximum=1.0)
    check_int("hidden_size", p["hidden_size"], minimum=1, maximum=2**16)
    check_int("checkpointing_steps", p["checkpointing_steps"], minimum=1, maximum=10**6)
    check_int("total_limit", p["total_limit"], minimum=1, maximum=100)
    # The kill must come after the first checkpoint, and between two of them.
    check_int("kill_at_step", p["kill_at_step"], minimum=p["checkpointing_steps"] + 1, maximum=10**7)
    if p["kill_at_step"] % p["checkpointing_steps"] == 0:
        raise ValueError(tr("parameter kill_at_step={value!r} falls on a checkpoint; "
                            "pick a step between two").format(value=p["kill_at_step"]))
    check_float("time_budget_s", p["time_budget_s"], minimum=0.01, maximum=7 * 24 * 3600)
    check_text("kaggle_owner", p["kaggle_owner"], max_length=64)
    # Memory: two MLPs on MNIST's 784 inputs live here at once (fp32 weights, grads, AdamW moments).
    hidden = p["hidden_size"]
    check_fits_memory("hidden_size", hidden, 2 * 16 * (784 * hidden + hidden * 10),
                      what=tr("two MLPs of that width with their AdamW state"))
