"""Small models the notebooks train. Introduced in notebook 01 (MNIST migration)."""

from __future__ import annotations

__all__ = ["build_mlp"]


def build_mlp(num_features: int, hidden_size: int, num_classes: int):
    """The classic MNIST multi-layer perceptron: Linear, ReLU, Linear. Input (B, num_features), output (B, classes).

    Build it after `accelerate.utils.set_seed(seed)`, and two builds hold the same weights.
    """
    from torch import nn

    return nn.Sequential(nn.Linear(num_features, hidden_size), nn.ReLU(), nn.Linear(hidden_size, num_classes))
