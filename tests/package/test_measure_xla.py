"""freegpu.measure and freegpu.xla."""

from __future__ import annotations

import importlib.util
import os

import pytest

from freegpu.measure import compare
from freegpu.xla import xla_status


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
    assert xla_status() == (False, None, None)
    assert "PJRT_DEVICE" not in os.environ  # nothing changed when there is nothing to use
