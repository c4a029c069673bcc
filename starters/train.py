"""Data-parallel training with Accelerate on Kaggle's GPU T4 x2, in fp16: a starter to copy.

    accelerate launch --config_file t4x2.yaml train.py [report.json]

or, from a notebook: notebook_launcher(main, args=("report.json",), num_processes=2).
Without a GPU the processes run on the CPU and join with gloo; fp16 then does nothing.
From the course "Accelerate on free notebooks" (starters/kaggle_t4x2.ipynb).
"""

import json
import sys

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

EPOCHS, BATCH_SIZE, LEARNING_RATE = 3, 64, 3e-3  # BATCH_SIZE is per process


def get_data(n=2048, features=32, classes=4):
    """A learnable toy task from torch alone. Your data: return two Datasets of (input, label)."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, features, generator=g)
    y = (x @ torch.randn(features, classes, generator=g)).argmax(1)  # the rule to learn
    cut = n * 3 // 4
    return TensorDataset(x[:cut], y[:cut]), TensorDataset(x[cut:], y[cut:])


def main(report="results.json"):
    # Each process creates its own Accelerator. Without a GPU, cpu=True joins them with gloo;
    # without it each CPU process would train alone, with no error.
    accelerator = Accelerator(mixed_precision="fp16", cpu=not torch.cuda.is_available())
    set_seed(0)  # reproducible start weights; prepare (DDP) copies rank 0's to every process
    train_set, eval_set = get_data()
    model = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 4))
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE)
    train_loader = DataLoader(train_set, batch_size=BATCH_SIZE, shuffle=True)
    eval_loader = DataLoader(eval_set, batch_size=256)
    # DDP model; each process now gets its own share of every epoch
    model, optimizer, train_loader, eval_loader = accelerator.prepare(
        model, optimizer, train_loader, eval_loader)
    losses = []
    for epoch in range(EPOCHS):
        model.train()
        total = torch.zeros((), device=accelerator.device)
        for x, y in train_loader:
            loss = nn.functional.cross_entropy(model(x), y)
            accelerator.backward(loss)  # scales the loss (fp16); DDP averages the gradients
            optimizer.step()
            optimizer.zero_grad()
            total += loss.detach()  # stays on the device: no wait per step
        losses.append(accelerator.reduce(total, "mean").item() / len(train_loader))
        accelerator.print(f"epoch {epoch}: mean training loss {losses[-1]:.4f}")
        accelerator.save_state(f"checkpoints/epoch_{epoch}")  # every process calls it (notebook 08)
    model.eval()
    correct = 0
    for x, y in eval_loader:
        with torch.no_grad():
            predictions = model(x).argmax(1)
        predictions, y = accelerator.gather_for_metrics((predictions, y))  # drops padding repeats
        correct += (predictions == y).sum().item()
    accelerator.wait_for_everyone()
    accelerator.save_model(model, "model")  # every process calls it; the main process writes
    if accelerator.is_main_process:
        results = {"first_loss": losses[0], "final_loss": losses[-1],
                   "eval_accuracy": correct / len(eval_set),
                   "num_processes": accelerator.num_processes,
                   "distributed_type": accelerator.distributed_type.value,
                   "device": accelerator.device.type,
                   "mixed_precision": accelerator.mixed_precision,
                   "loss_scaling": accelerator.scaler is not None}
        with open(report, "w") as f:
            json.dump(results, f, indent=2)
        print(f"{report}: {results}")
    accelerator.end_training()  # closes the process group before the process exits


if __name__ == "__main__":
    main(*sys.argv[1:])
