"""freegpu.data, freegpu.models and freegpu.checkpoint against oracles."""

from __future__ import annotations

import pytest
import torch
from accelerate.utils import set_seed

from freegpu.checkpoint import replace_dir
from freegpu.data import load_mnist
from freegpu.models import build_mlp


def test_smoke_digits_are_real_and_split_by_seed():
    data = load_mnist("smoke", seed=42)
    x_train, y_train = data.train.tensors
    x_eval, y_eval = data.eval.tensors
    assert len(x_train) + len(x_eval) == 1797 and len(x_eval) == 359  # odd: no batch size > 1 divides it
    assert x_train.dtype == torch.float32 and y_train.dtype == torch.int64
    assert x_train.shape[1] == data.num_features == 64 and data.num_classes == 10
    assert 0.0 == float(x_train.min()) and float(x_train.max()) == 1.0
    assert set(y_eval.tolist()) == set(range(10))
    again = load_mnist("smoke", seed=42)
    assert torch.equal(again.eval.tensors[0], x_eval)
    other = load_mnist("smoke", seed=1)
    assert not torch.equal(other.eval.tensors[0], x_eval)


def test_profile_must_be_resolved():
    with pytest.raises(ValueError, match="'auto'"):
        load_mnist("auto")


def test_seeded_models_are_identical():
    set_seed(0)
    a = build_mlp(64, 16, 10)
    set_seed(0)
    b = build_mlp(64, 16, 10)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))
    assert a(torch.zeros(3, 64)).shape == (3, 10)


def test_replace_dir_swaps_complete_folders_only(tmp_path):
    target = tmp_path / "model"
    with replace_dir(target) as tmp:
        (tmp / "weights").write_text("v1")
    assert (target / "weights").read_text() == "v1"
    with pytest.raises(RuntimeError):
        with replace_dir(target) as tmp:
            (tmp / "weights").write_text("half of v2")
            raise RuntimeError("crash while saving")
    assert (target / "weights").read_text() == "v1"  # the old checkpoint survived
    with replace_dir(target) as tmp:
        (tmp / "weights").write_text("v2")
    assert (target / "weights").read_text() == "v2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]  # nothing temporary left


def test_begin_resolves_profile_and_output_dir(tmp_path, monkeypatch):
    from freegpu import notebook

    monkeypatch.setattr(notebook, "has_internet", lambda: False)
    info, hw, resolved, reason, out = notebook.begin("01_mnist_migration", "smoke", str(tmp_path / "o"))
    assert resolved == "smoke" and reason and out == tmp_path / "o" and out.is_dir()
    assert hw.logical_cpus >= 1 and info.name
    with pytest.raises(RuntimeError, match="profile='smoke'"):
        notebook.begin("01_mnist_migration", "full", str(tmp_path / "full"), {"data_dir": "ylecun/mnist"})
    assert not (tmp_path / "full").exists()  # failed before creating anything
    # A full profile that reads only folders (or nothing, as 00 and 03) needs no network.
    assert notebook.begin("03_memory_tricks", "full", str(tmp_path / "f3")).profile == "full"
    assert notebook.begin("01_mnist_migration", "full", str(tmp_path / "f1"), {"data_dir": str(tmp_path)}).profile
