"""freegpu.data and freegpu.models against oracles."""

from __future__ import annotations

import pytest
import torch
from accelerate.utils import set_seed

from freegpu.data import load_mnist
from freegpu.models import accuracy, build_mlp


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


def test_accuracy_leaves_the_model_where_it_was():
    """`accuracy` counts correct predictions without moving the caller's model or changing its mode."""
    set_seed(0)
    data = load_mnist("smoke", seed=42)
    model = build_mlp(64, 16, 10).to(torch.float64)  # a dtype `accuracy` must not touch either
    inputs, labels = data.eval.tensors
    dataset = torch.utils.data.TensorDataset(inputs.double(), labels)
    with torch.no_grad():
        expected = (model(inputs.double()).argmax(-1) == labels).float().mean().item()
    assert accuracy(model, dataset, batch_size=7) == pytest.approx(expected)
    assert model.training and next(model.parameters()).dtype == torch.float64
    model.eval()
    accuracy(model, dataset)
    assert not model.training  # the mode it was in


def test_accuracy_evaluates_on_the_models_device(monkeypatch):
    """On a GPU the old helper moved the learner's model to the CPU; now each batch goes to the model instead."""
    seen = []
    model = build_mlp(64, 16, 10)
    monkeypatch.setattr(model, "cpu", lambda: seen.append("cpu") or model)
    data = load_mnist("smoke", seed=42)
    accuracy(model, data.eval)
    assert seen == []


def test_begin_resolves_profile_and_output_dir(tmp_path, monkeypatch):
    from freegpu import notebook

    monkeypatch.setattr(notebook, "has_internet", lambda: False)
    info, hw, resolved, out = notebook.begin("01_mnist_migration", "smoke", str(tmp_path / "o"))
    assert resolved == "smoke" and out == tmp_path / "o" and out.is_dir()
    assert hw.logical_cpus >= 1 and info.name
    with pytest.raises(RuntimeError, match="profile='smoke'"):
        notebook.begin("01_mnist_migration", "full", str(tmp_path / "full"), {"data_dir": "ylecun/mnist"})
    assert not (tmp_path / "full").exists()  # failed before creating anything
    # A full profile that reads only folders (or nothing, as 00 and 03) needs no network.
    assert notebook.begin("03_memory_tricks", "full", str(tmp_path / "f3")).profile == "full"
    assert notebook.begin("01_mnist_migration", "full", str(tmp_path / "f1"), {"data_dir": str(tmp_path)}).profile
