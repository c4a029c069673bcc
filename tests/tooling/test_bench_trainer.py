"""build/bench_trainer.py (`make bench`): notebook 05's loop against `Trainer`. Its figures are a benchmark, not a
test; this checks that it runs on a tiny configuration and writes a well-formed report."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT

OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def test_bench_trainer_runs_and_writes_its_report(tmp_path):
    out = tmp_path / "bench" / "trainer_vs_course.json"
    done = subprocess.run([sys.executable, str(ROOT / "build" / "bench_trainer.py"), "--out", str(out),
                           "--train-samples", "16", "--batch-size", "8", "--epochs", "1", "--trials", "3",
                           "--arms", "course,trainer", "--threads", "1"],
                          env={**os.environ, **OFFLINE}, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["work"]["train_examples"] == 16 and result["work"]["epochs"] == 1 and result["trials"] == 3
    assert result["work"]["threads"] == 1 and result["work"]["device"] == "cpu"
    assert list(result["arms"]) == ["course", "trainer"]
    for arm in result["arms"].values():
        for s in (arm["samples_per_s"], arm["samples_per_cpu_s"]):
            assert s["n"] == 3 and 0 < s["min"] <= s["median"] <= s["max"]
        assert [r["samples_per_s"] for r in arm["runs"]] == pytest.approx([16 / r["seconds"] for r in arm["runs"]])
        assert [r["samples_per_cpu_s"] for r in arm["runs"]] == pytest.approx([16 / r["cpu_seconds"]
                                                                               for r in arm["runs"]])
        assert all(r["tokens"] > 0 and r["mean_loss"] > 0 for r in arm["runs"])
    # Same work: the same examples, padded per batch (shuffled differently, so token counts may differ a little).
    tokens = {name: arm["runs"][0]["tokens"] for name, arm in result["arms"].items()}
    assert max(tokens.values()) <= 1.5 * min(tokens.values())
    assert list(result["ratios"]) == list(result["ratios_cpu"]) == ["course/trainer"]  # only arms that ran
    ratio = result["ratios"]["course/trainer"]
    assert ratio["n"] == 3 and 0 < ratio["min"] <= ratio["median"] <= ratio["max"]
    per_round = [a["samples_per_s"] / b["samples_per_s"]
                 for a, b in zip(result["arms"]["course"]["runs"], result["arms"]["trainer"]["runs"], strict=True)]
    assert ratio["median"] == pytest.approx(sorted(per_round)[1])
    assert "course/trainer" in done.stdout and str(out) in done.stdout


def test_bench_trainer_arms_are_what_they_say():
    from build import bench_trainer as bench

    course = inspect.getsource(bench.course_arm)
    taught = "torch.optim.AdamW(model.parameters(), lr=args.learning_rate, fused=fused)"  # 05's, with fused=True
    assert "train_classifier(" in course and taught in course
    assert "optim=None" in inspect.getsource(bench.run_arm)  # Trainer's own default optimizer
    with pytest.raises(SystemExit):
        bench.parse(["--trials", "2"])
    with pytest.raises(SystemExit):
        bench.parse(["--arms", "course,nothing"])
    assert bench.parse([]).arms == list(bench.ARMS)
