"""build/device_check.py: the prepared GPU check (every notebook's full profile and the GPU-only claims), tested
here on its CPU fallback."""

from __future__ import annotations

import json

import pytest
from conftest import NOTEBOOK_NAMES, full_parameters

from build import device_check as check

pytestmark = pytest.mark.notebook


def test_it_covers_every_notebook_with_the_full_profiles_parameters():
    assert check.NOTEBOOKS == tuple(NOTEBOOK_NAMES)
    folders = {"mnist": "/m", "glue": "/g", "bert": "/b"}
    for name in NOTEBOOK_NAMES:  # the same folders as tests/notebooks/test_full_profile.py gives each notebook
        assert check.parameters(name, folders, gpu=True) == full_parameters(name, folders), name
    assert check.parameters("02_mixed_precision", folders, gpu=False)["d_model"] == 64  # the CPU fallback
    found = check.samples_per_s({"train_samples_per_s": 12.5, "x_samples_per_s": {"median": 3.0, "n": 3},
                                 "wall_s": 4, "samples_per_s_note": "text"})
    assert found == {"train_samples_per_s": 12.5, "x_samples_per_s": 3.0}


def test_claims_measure_every_mode_and_the_ratios_the_claims_table_waits_for():
    claims = check.claims(gpu=False)  # the CPU fallback: tiny size, bf16 for fp16
    assert list(claims["modes"]) == ["plain", "no", "bf16"]
    for run in claims["modes"].values():
        assert run["median_step_ms"] > 0 and 0 <= run["accuracy"] <= 1 and run["peak_allocated_mib"] is None
    assert set(claims["ratios"]) == {"speedup_bf16_vs_fp32", "accuracy_change_bf16_vs_fp32",
                                     "accelerate_step_vs_plain"}  # plus memory_saved_fp16_vs_fp32 on a GPU
    assert claims["gpus"] == 0 and claims["two_gpus"].startswith("not measured")
    assert all(run["samples_per_s"] > 0 and run["processes"] == 1 for run in claims["modes"].values())


def test_two_processes_train_the_claims_model_on_their_own_batches(tmp_path):
    """What two GPUs run for "小模型上双卡甚至可能比单卡慢", here as two gloo processes on the CPU."""
    two = check.two_processes("no", check.CPU_SIZE, gpu=False, folder=tmp_path)
    assert two.get("processes") == 2, two.get("error")
    assert two["samples_per_s"] > 0 and 0 <= two["accuracy"] <= 1


def test_a_notebook_past_the_budget_is_skipped_not_started(tmp_path):
    summary = check.check(tmp_path, ("00_environment_check",), budget_s=-1, with_claims=False)
    assert summary["notebooks"]["00_environment_check"]["status"] == "skipped"
    assert not (tmp_path / "results").exists() and not (tmp_path / "hub").exists()


def test_cpu_fallback_runs_the_full_profile(tmp_path):
    summary = check.check(tmp_path, ("02_mixed_precision",))
    assert summary["gpu"] is None and "CPU" in summary["fallback"]
    assert summary["claims"]["modes"]["no"]["accuracy"] >= 0
    entry = summary["notebooks"]["02_mixed_precision"]
    assert entry["status"] == "ok", entry["error"]
    assert entry["device"] == "cpu" and entry["cuda_max_memory_allocated_bytes"] is None
    assert (tmp_path / entry["results"]).is_file()  # the notebook's results.json comes back with the summary
    assert json.loads((tmp_path / "device_check.json").read_text()) == summary
    assert not (tmp_path / "hub").exists()
