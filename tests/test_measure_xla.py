"""freegpu.measure and freegpu.xla."""

from __future__ import annotations

import importlib.util
import os

import pytest
import torch
from torch.utils.data import TensorDataset

from freegpu.data import CostlyDataset
from freegpu.measure import loader_throughput
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


@pytest.mark.skipif(importlib.util.find_spec("torch_xla") is not None, reason="torch_xla is installed here")
def test_xla_status_without_torch_xla(monkeypatch):
    monkeypatch.delenv("PJRT_DEVICE", raising=False)
    ok, reason = xla_status()
    assert ok is False and "not installed" in reason and "torch 2.9.0" in reason
    assert "PJRT_DEVICE" not in os.environ  # nothing changed when there is nothing to use
