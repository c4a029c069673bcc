"""The Accelerate training loop taught in notebook 01, for the notebooks after it (04 trains with it on XLA).

A test checks that `train_accelerate` is, character for character, the one notebook 01 writes out (and diffs
there against the plain PyTorch loop). Notebook 01's launch script holds its own copy, so that it runs without
this package. With it, notebook 01's proof machinery: the diff of two loops, the largest differences of two
runs, their loss curves. Importing this module imports torch.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

__all__ = ["train_accelerate", "show_diff", "max_differences", "plot_losses"]


def train_accelerate(accelerator, model, dataset, num_epochs, batch_size, learning_rate, seed):
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
    generator = torch.Generator().manual_seed(seed)
    dataloader = DataLoader(dataset, batch_size=batch_size, shuffle=True, generator=generator)
    model, optimizer, dataloader = accelerator.prepare(model, optimizer, dataloader)  # NEW
    losses = []
    for epoch in range(num_epochs):
        for inputs, targets in dataloader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(inputs), targets)
            accelerator.backward(loss)  # NEW
            optimizer.step()
            losses.append(loss.item())
    return losses


def show_diff(before, after) -> int:
    """Display the unified diff of two functions' source, as a diff block; return how many lines it removes or
    adds. Read from the running functions (`inspect.getsource`), it cannot drift from what runs (notebook 01)."""
    import difflib
    import inspect

    from IPython.display import display

    diff = "\n".join(difflib.unified_diff(inspect.getsource(before).splitlines(),
                                          inspect.getsource(after).splitlines(), before.__name__,
                                          after.__name__, lineterm="", n=1))
    display({"text/markdown": f"```diff\n{diff}\n```", "text/plain": diff}, raw=True)
    return sum(1 for line in diff.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---"))


def max_differences(plain_losses, losses, plain_model, model) -> dict[str, float]:
    """The proof of an exact migration: the largest |difference| between two runs' per-step losses, and between
    their final weights (parameter by parameter; both lists and both models must match in length)."""
    return {"max_abs_loss_diff": max(abs(a - b) for a, b in zip(plain_losses, losses, strict=True)),
            "max_abs_weight_diff": max((p - q).abs().max().item() for p, q in
                                       zip(plain_model.parameters(), model.parameters(), strict=True))}


def plot_losses(plain_losses, losses, max_abs_loss_diff: float, folder) -> None:
    """Both runs' loss per step on one log-scale plot, saved to `folder/loss_curves.png` and shown: an exact
    migration shows one curve, the dashed one on top of the wide one."""
    from pathlib import Path

    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.plot(plain_losses, label="plain PyTorch", linewidth=3, alpha=0.5)
    ax.plot(losses, label="Accelerate", linestyle="--")
    ax.set(xlabel="training step", ylabel="cross-entropy loss", yscale="log",
           title=f"Same seed, same steps: max |difference| = {max_abs_loss_diff:g}")
    ax.legend()
    fig.savefig(Path(folder) / "loss_curves.png", dpi=120, bbox_inches="tight")
    plt.show()
