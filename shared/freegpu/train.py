"""The Accelerate training and evaluation loops taught in notebook 01, for its launch script and later notebooks.

Importing this module imports torch. The tests check that each function is, character for character, the one
notebook 01 writes out (`train_accelerate` is diffed there against the plain PyTorch loop).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

__all__ = ["train_accelerate", "evaluate_accelerate"]


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


def evaluate_accelerate(accelerator, model, eval_dataset, batch_size):
    eval_dataloader = accelerator.prepare(DataLoader(eval_dataset, batch_size=batch_size))
    correct, counted, gathered = 0, 0, 0
    model.eval()
    for inputs, targets in eval_dataloader:
        with torch.no_grad():
            predictions = model(inputs).argmax(-1)
        gathered += len(accelerator.gather(targets))  # pads the last batches with repeated samples
        predictions, targets = accelerator.gather_for_metrics((predictions, targets))  # drops them
        correct += (predictions == targets).sum().item()
        counted += len(targets)
    return correct / counted, counted, gathered
