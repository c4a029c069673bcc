"""Notebook 01's parameters and their allowed values."""

from __future__ import annotations

from typing import Any

from ..checks import check_choice, check_fits_memory, check_float, check_int, check_seed, check_source
from ..data import MNIST_HUB_ID
from ..i18n import tr
from ..profile import PROFILES

NAMES = ("profile", "output_dir", "data_dir", "seed", "num_epochs", "batch_size", "learning_rate", "hidden_size",
         "num_processes")


def check(p: dict[str, Any]) -> None:
    check_choice("profile", p["profile"], PROFILES)
    check_source("data_dir", p["data_dir"], hub_default=MNIST_HUB_ID)
    check_seed("seed", p["seed"])
    check_float("learning_rate", p["learning_rate"], minimum=1e-6, maximum=1.0)
    for name, low, high in [("num_epochs", 1, 20), ("batch_size", 2, 4096), ("hidden_size", 1, 2**20),
                            ("num_processes", 2, 8)]:
        check_int(name, p[name], minimum=low, maximum=high)
    # Refused before anything is allocated: fp32 weights, gradients, AdamW's two moments and a batch of
    # activations for MNIST's 784 features (the digits have 64); num_processes + 4 MLPs live at once.
    hidden, batch, processes = p["hidden_size"], p["batch_size"], p["num_processes"]
    model_bytes = 16 * (784 * hidden + hidden * 10) + 4 * batch * (784 + 3 * hidden)
    check_fits_memory("hidden_size", hidden, (processes + 4) * model_bytes,
                      what=tr("{count} MLPs of that width, batch_size={batch}").format(count=processes + 4,
                                                                                       batch=batch))
