"""Small models the notebooks train. Introduced in notebook 01 (MNIST migration); the row transformer in 02."""

from __future__ import annotations

__all__ = ["build_mlp", "build_row_transformer", "accuracy"]


def build_mlp(num_features: int, hidden_size: int, num_classes: int):
    """The classic MNIST multi-layer perceptron: Linear, ReLU, Linear. Input (B, num_features), output (B, classes).

    Build it after `accelerate.utils.set_seed(seed)`, and two builds hold the same weights.
    """
    from torch import nn

    return nn.Sequential(nn.Linear(num_features, hidden_size), nn.ReLU(), nn.Linear(hidden_size, num_classes))


def build_row_transformer(num_rows: int, row_features: int, d_model: int, num_layers: int, num_classes: int,
                          num_heads: int = 4):
    """A small pre-norm transformer encoder that reads an image as a sequence of rows (notebook 02).

    Input (B, num_rows * row_features), flattened as `freegpu.data.load_mnist` returns it; each row becomes one
    token. Attention, layer norms, GELU and the feed-forward block are what make mixed precision interesting;
    an MLP has none of them. Output (B, num_classes).
    """
    import torch
    from torch import nn

    class RowTransformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Linear(row_features, d_model)
            self.position = nn.Parameter(torch.zeros(num_rows, d_model))
            layer = nn.TransformerEncoderLayer(d_model, num_heads, 4 * d_model, dropout=0.0, activation="gelu",
                                               batch_first=True, norm_first=True)
            self.encoder = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
            self.head = nn.Linear(d_model, num_classes)

        def forward(self, images):
            tokens = self.embed(images.view(len(images), num_rows, row_features)) + self.position  # (B, T, C)
            return self.head(self.encoder(tokens).mean(dim=1))  # (B, num_classes)

    return RowTransformer()


def accuracy(model, dataset, batch_size: int = 512) -> float:
    """Accuracy of `model` on a `TensorDataset` of (inputs, labels), in plain PyTorch, on the model's own device.

    The model stays where it is, and in the mode it was in; the result is correct / total, the same division as
    notebook 01's `evaluate_accelerate`.
    """
    import torch
    from torch.utils.data import DataLoader

    device, training = next(model.parameters()).device, model.training
    model.eval()
    with torch.no_grad():
        batches = DataLoader(dataset, batch_size)
        predictions = torch.cat([model(inputs.to(device)).argmax(-1).cpu() for inputs, _ in batches])
    model.train(training)
    return (predictions == dataset.tensors[1]).sum().item() / len(predictions)
