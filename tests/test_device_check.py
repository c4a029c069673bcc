"""build/device_check.py: the prepared GPU check of the learner's path, tested here for its CPU fallback."""

from __future__ import annotations

import json

import pytest
from conftest import load_build_script

pytestmark = pytest.mark.notebook


def test_parameters_and_throughputs():
    check = load_build_script("device_check")
    folders = {"mnist": "/m", "glue": "/g", "bert": "/b"}
    assert check.parameters("05_bert_finetune", folders, gpu=True) == {"profile": "full", "data_dir": "/g",
                                                                        "model_name": "/b"}
    assert check.parameters("02_mixed_precision", folders, gpu=True) == {"profile": "full", "data_dir": "/m"}
    assert check.parameters("02_mixed_precision", folders, gpu=False)["d_model"] == 64  # the CPU fallback
    found = check.samples_per_s({"train_samples_per_s": 12.5, "x_samples_per_s": {"median": 3.0, "n": 3},
                                 "wall_s": 4, "samples_per_s_note": "text"})
    assert found == {"train_samples_per_s": 12.5, "x_samples_per_s": 3.0}


def test_cpu_fallback_runs_the_full_profile(tmp_path):
    check = load_build_script("device_check")
    summary = check.check(tmp_path, ("02_mixed_precision",))
    assert summary["gpu"] is None and "CPU" in summary["fallback"]
    entry = summary["notebooks"]["02_mixed_precision"]
    assert entry["status"] == "ok", entry["error"]
    assert entry["device"] == "cpu" and entry["cuda_max_memory_allocated_bytes"] is None
    assert json.loads((tmp_path / "device_check.json").read_text()) == summary
    assert not (tmp_path / "hub").exists()
