"""Notebook 05's parameters and their allowed values."""

from __future__ import annotations

from typing import Any

from ..checks import check_choice, check_fits_memory, check_float, check_int, check_seed, check_source
from ..data import FULL_MODEL, GLUE_HUB_ID, GLUE_TASKS
from ..i18n import tr
from ..precision import MODES
from ..profile import PROFILES

NAMES = ("profile", "output_dir", "seed", "task", "data_dir", "model_name", "max_length", "num_epochs",
         "batch_size", "gradient_accumulation_steps", "learning_rate", "warmup_ratio", "max_grad_norm",
         "mixed_precision", "max_train_samples")


def check(p: dict[str, Any]) -> None:
    """The memory estimate: fp32 weights, gradients and two AdamW moments (16 bytes a parameter), plus the
    activations a batch keeps for backward (about 20 floats per token, hidden unit and layer), for BERT-base unless
    the smoke profile's MiniLM is used."""
    check_choice("profile", p["profile"], PROFILES)
    check_source("data_dir", p["data_dir"], hub_default=GLUE_HUB_ID)
    check_source("model_name", p["model_name"], hub_default=FULL_MODEL, data=False)
    check_seed("seed", p["seed"])
    check_choice("task", p["task"], tuple(GLUE_TASKS))
    check_int("max_length", p["max_length"], minimum=8, maximum=512)  # BERT's positions stop at 512
    check_int("num_epochs", p["num_epochs"], minimum=1, maximum=20)
    check_int("batch_size", p["batch_size"], minimum=2, maximum=512)
    check_int("gradient_accumulation_steps", p["gradient_accumulation_steps"], minimum=1, maximum=64)
    check_float("learning_rate", p["learning_rate"], minimum=0.0, maximum=1e-2)
    check_float("warmup_ratio", p["warmup_ratio"], minimum=0.0, maximum=0.5)
    check_float("max_grad_norm", p["max_grad_norm"], minimum=0.01, maximum=100.0)
    check_choice("mixed_precision", p["mixed_precision"], MODES)
    check_int("max_train_samples", p["max_train_samples"], minimum=0, maximum=10_000_000)
    smoke_model = p["profile"] == "smoke" and not p["model_name"]
    params, hidden, layers = (22.7e6, 384, 6) if smoke_model else (110e6, 768, 12)
    activations = 4 * 20 * p["batch_size"] * p["max_length"] * hidden * layers
    check_fits_memory("batch_size", p["batch_size"], int(16 * params + activations),
                      what=tr("training state and one batch of activations"))
