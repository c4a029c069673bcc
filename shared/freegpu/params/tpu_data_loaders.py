"""Notebook 04's parameters and their allowed values."""

from __future__ import annotations

from typing import Any

from ..checks import (
    check_choice,
    check_fits_disk,
    check_fits_memory,
    check_fits_time,
    check_float,
    check_int,
    check_seed,
    check_source,
)
from ..data import MNIST_HUB_ID
from ..i18n import tr
from ..platform import detect_platform, platform_dirs
from ..profile import PROFILES

NAMES = ("profile", "output_dir", "data_dir", "seed", "batch_size", "loader_samples", "cost_ms", "memmap_rows",
         "row_features")
# Step 1's passes over the loader samples: at most 6 worker counts x 3, 18 passes of CPU work, most of it in
# workers, so at least 2 cores share it.
LOADER_PASSES = 9


def check(p: dict[str, Any]) -> None:
    check_choice("profile", p["profile"], PROFILES)
    check_source("data_dir", p["data_dir"], hub_default=MNIST_HUB_ID)
    check_seed("seed", p["seed"])
    batch_size = p["batch_size"]
    check_int("batch_size", batch_size, minimum=2, maximum=4096)
    check_int("loader_samples", p["loader_samples"], minimum=batch_size, maximum=2**20)
    check_float("cost_ms", p["cost_ms"], minimum=0.0, maximum=100.0)
    check_int("memmap_rows", p["memmap_rows"], minimum=batch_size, maximum=2**24)
    check_int("row_features", p["row_features"], minimum=1, maximum=2**16)
    samples, cost_ms, rows, features = p["loader_samples"], p["cost_ms"], p["memmap_rows"], p["row_features"]
    # Each sample costs cost_ms of CPU work.
    check_fits_time("loader_samples", samples, LOADER_PASSES * samples * cost_ms / 1000,
                    what=tr("{passes} passes at cost_ms={cost_ms} (lower either)").format(passes=LOADER_PASSES,
                                                                                          cost_ms=cost_ms),
                    limit_s=600)
    # float32 rows, estimated before anything is allocated: step 1 holds its samples, step 2 its rows
    # twice in RAM (generated, then read back) and once on disk.
    row_bytes = 4 * (features + 1)
    check_fits_memory("loader_samples", samples, samples * row_bytes,
                      what=tr("loader samples of row_features={features} values").format(features=features))
    check_fits_memory("memmap_rows", rows, 2 * rows * row_bytes,
                      what=tr("rows of row_features={features} values, twice").format(features=features))
    scratch = platform_dirs(detect_platform()).scratch_dir
    check_fits_disk("memmap_rows", rows, rows * row_bytes, scratch,
                    what=tr("the memmap file of row_features={features} values per row").format(features=features))
