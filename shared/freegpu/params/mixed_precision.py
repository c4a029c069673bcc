"""Notebook 02's parameters and their allowed values."""

from __future__ import annotations

from typing import Any

from ..checks import check_choice, check_fits_memory, check_float, check_int, check_seed, check_source
from ..data import MNIST_HUB_ID
from ..i18n import tr
from ..precision import MODES
from ..profile import PROFILES

NAMES = ("profile", "output_dir", "data_dir", "seed", "mixed_precision", "d_model", "num_layers", "batch_size",
         "learning_rate", "scaler_growth_interval")


def check(p: dict[str, Any]) -> None:
    check_choice("profile", p["profile"], PROFILES)
    check_source("data_dir", p["data_dir"], hub_default=MNIST_HUB_ID)
    check_seed("seed", p["seed"])
    check_choice("mixed_precision", p["mixed_precision"], MODES)
    for name, low, high in [("d_model", 0, 4096), ("num_layers", 1, 24), ("batch_size", 2, 8192)]:
        check_int(name, p[name], minimum=low, maximum=high)
    check_float("learning_rate", p["learning_rate"], minimum=1e-6, maximum=1.0)
    check_int("scaler_growth_interval", p["scaler_growth_interval"], minimum=1, maximum=2000)
    d_model, batch_size, num_layers = p["d_model"], p["batch_size"], p["num_layers"]
    if d_model % 4:
        raise ValueError(tr("parameter d_model={value!r} must be a multiple of 4 (attention heads)").format(
            value=d_model))
    widest = d_model or 512  # fp32 activations of one step: ~40 floats per token and width, per block
    check_fits_memory("batch_size", batch_size, batch_size * 28 * widest * 4 * 40 * num_layers,
                      what=tr("the fp32 activations of one training step"))
