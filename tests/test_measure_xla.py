"""freegpu.measure and freegpu.xla."""

from __future__ import annotations

import importlib.util
import os

import pytest
import torch
from torch.utils.data import TensorDataset

from freegpu.data import CostlyDataset
from freegpu.measure import compare, compare_loaders, loader_throughput
from freegpu.xla import xla_status


def test_loader_throughput_counts_every_sample_and_its_cost():
    base = TensorDataset(torch.zeros(64, 4), torch.zeros(64))
    cheap = loader_throughput(base, batch_size=16)
    costly = loader_throughput(CostlyDataset(base, cost_ms=2.0), batch_size=16)
    # 64 samples at >= 2 ms each cannot go faster than 500 samples/s.
    assert costly["samples_per_s"] <= 500 < cheap["samples_per_s"]
    assert 0 <= costly["first_batch_s"] and costly["warnings"] == []


def test_loader_throughput_records_dataloader_warnings():
    base = TensorDataset(torch.zeros(8, 2), torch.zeros(8))
    too_many = os.cpu_count() + 2
    result = loader_throughput(base, batch_size=4, num_workers=too_many)
    assert any("suggested max number of worker" in w for w in result["warnings"])


def test_compare_loaders_interleaves_settings_and_pairs_their_trials():
    small, large = TensorDataset(torch.zeros(8, 2), torch.zeros(8)), TensorDataset(torch.zeros(64, 2), torch.zeros(64))
    compared = compare_loaders({"small": {"dataset": small}, "large": {"dataset": large, "batch_size": 8}},
                               repeats=2, batch_size=4)
    assert list(compared.passes) == ["small", "large"] and all(len(v) == 2 for v in compared.passes.values())
    assert compared.samples_per_s["large"]["n"] == 2 and compared.warnings == {"small": [], "large": []}
    ratio = compare(compared.passes["large"], compared.passes["small"])
    assert ratio["min"] == min(a / b for a, b in zip(compared.passes["large"], compared.passes["small"], strict=True))


def test_compare_is_resolved_either_way_and_only_when_every_trial_agrees():
    assert compare([2.0, 3.0], [1.0, 1.0]) == {"median": 2.5, "min": 2.0, "max": 3.0, "n": 2, "resolved": True}
    assert compare([0.5, 0.6], [1.0, 1.0])["resolved"]  # faster in every trial counts as much as slower
    assert not compare([0.9, 1.2], [1.0, 1.0])["resolved"]
    assert compare([3.0, 1.0], [1.0, 2.0], kind="difference") == {
        "median": 0.5, "min": -1.0, "max": 2.0, "n": 2, "resolved": False}
    assert compare([0.0, 0.5], [1.0, 1.0], kind="difference")["resolved"]
    with pytest.raises(ValueError, match="'ratio' or 'difference'"):
        compare([1.0], [1.0], kind="share")


@pytest.mark.skipif(importlib.util.find_spec("torch_xla") is not None, reason="torch_xla is installed here")
def test_xla_status_without_torch_xla(monkeypatch):
    monkeypatch.delenv("PJRT_DEVICE", raising=False)
    ok, reason = xla_status()
    assert ok is False and "not installed" in reason and "torch 2.9.0" in reason
    assert "PJRT_DEVICE" not in os.environ  # nothing changed when there is nothing to use
