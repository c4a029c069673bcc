"""Notebook 03's parameters and their allowed values."""

from __future__ import annotations

from typing import Any

from ..checks import check_choice, check_fits_memory, check_float, check_int, check_seed
from ..i18n import tr
from ..profile import PROFILES

NAMES = ("profile", "output_dir", "seed", "num_rows", "row_features", "d_model", "num_layers", "batch_size",
         "gradient_accumulation_steps", "learning_rate", "timing_trials", "starting_batch_size", "budget_mib",
         "leak_steps")


def check(p: dict[str, Any]) -> None:
    check_choice("profile", p["profile"], PROFILES)
    check_seed("seed", p["seed"])
    check_float("learning_rate", p["learning_rate"], minimum=1e-6, maximum=1.0)
    for name, low, high in [("num_rows", 2, 1024), ("row_features", 1, 1024), ("d_model", 8, 2048),
                            ("num_layers", 1, 48), ("batch_size", 4, 4096), ("timing_trials", 3, 20)]:
        check_int(name, p[name], minimum=low, maximum=high)
    check_int("gradient_accumulation_steps", p["gradient_accumulation_steps"], minimum=2, maximum=p["batch_size"])
    for name, low, high in [("starting_batch_size", 2, 65536), ("leak_steps", 2, 50), ("budget_mib", 16, 65536)]:
        check_int(name, p[name], minimum=low, maximum=high)
    for name, divisor in [("d_model", 4), ("batch_size", p["gradient_accumulation_steps"])]:
        if p[name] % divisor:
            raise ValueError(tr("parameter {name}={value} must be a multiple of {divisor}").format(
                name=name, value=p[name], divisor=divisor))
    # Step 5 keeps leak_steps batches of activations alive on purpose. Each token saves about 16 float32 values
    # per unit of width and per block (measured in step 1).
    batch, rows, width, layers, leak_steps = (p[n] for n in ("batch_size", "num_rows", "d_model", "num_layers",
                                                             "leak_steps"))
    activation_bytes_per_batch = 4 * 16 * batch * rows * width * layers
    check_fits_memory("leak_steps", leak_steps, (leak_steps + 4) * activation_bytes_per_batch,
                      what=tr("{count} batches of activations (batch_size={batch})").format(count=leak_steps + 4,
                                                                                     batch=batch))
