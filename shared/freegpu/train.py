"""The Accelerate training loop taught in notebook 01, for the notebooks after it (04 trains with it on XLA).

Importing this module imports torch. A test checks that it is, character for character, the one notebook 01
writes out (and diffs there against the plain PyTorch loop). Notebook 01's launch script holds its own copy,
so that it runs without this package.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

__all__ = ["train_accelerate"]


def train_accelerate(accelerator, model, train_dataset, num_epochs, batch_size, learning_rate,
                     seed):
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
    generator = torch.Generator().manual_seed(seed)
    train_dataloader = DataLoader(train_dataset, batch_size=batch_size, shuffle=True,
                                  generator=generator)
    model, optimizer, train_dataloader = accelerator.prepare(  # NEW
        model, optimizer, train_dataloader)
    losses = []
    model.train()
    for epoch in range(num_epochs):
        for inputs, targets in train_dataloader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(inputs), targets)
            accelerator.backward(loss)  # NEW
            optimizer.step()
            losses.append(loss.item())
    return losses

