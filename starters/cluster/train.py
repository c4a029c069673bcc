"""Data-parallel training with Accelerate on several machines: a starter to copy.

    accelerate launch --config_file multi_node.yaml --machine_rank R train.py [--cpu] [report.json]

Under SLURM, train.sbatch starts it on every node. --cpu rehearses on CPU processes joined by gloo;
on GPUs leave it out and nothing else changes. Needs only torch and Accelerate.
From the course "Accelerate on free notebooks" (starters/cluster/README.md).
"""

import json
import socket
import sys

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

EPOCHS, BATCH_SIZE, LEARNING_RATE = 2, 64, 3e-3  # BATCH_SIZE is per process


def get_data(n=1024, features=32, classes=4):
    """A learnable toy task from torch alone. Your data: return a Dataset of (input, label)."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, features, generator=g)
    y = (x @ torch.randn(features, classes, generator=g)).argmax(1)  # the rule to learn
    return TensorDataset(x, y)


def main(report="results.json", cpu=False):
    # cpu=True joins CPU processes with gloo; without it each CPU process would train alone.
    accelerator = Accelerator(cpu=cpu or not torch.cuda.is_available())
    set_seed(0)  # reproducible start weights; prepare (DDP) copies rank 0's to every process
    model = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 4))
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE)
    loader = DataLoader(get_data(), batch_size=BATCH_SIZE, shuffle=True)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    losses = []
    for _ in range(EPOCHS):
        total = torch.zeros((), device=accelerator.device)
        for x, y in loader:
            x = x.to(next(model.parameters()).dtype)  # DeepSpeed bf16 casts weights, not inputs
            loss = nn.functional.cross_entropy(model(x), y)
            accelerator.backward(loss)  # DDP averages the gradients over every process
            optimizer.step()
            optimizer.zero_grad()
            total += loss.detach()
        # the mean over all processes: every rank prints the same number
        losses.append(accelerator.reduce(total / len(loader), reduction="mean").item())
    rank, world, local = (accelerator.process_index, accelerator.num_processes,
                          accelerator.local_process_index)
    print(f"rank {rank}/{world} on {socket.gethostname()} (local {local}): "
          f"losses {[round(v, 6) for v in losses]}", flush=True)
    row = {"rank": accelerator.process_index, "world": accelerator.num_processes,
           "local_rank": accelerator.local_process_index,
           "distributed_type": str(accelerator.distributed_type), "losses": losses}
    # each rank writes its own line: a test or you can compare them
    with open(f"{report}.rank{accelerator.process_index}", "w") as f:
        json.dump(row, f)
    accelerator.end_training()


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--cpu"]
    main(*args[:1], cpu="--cpu" in sys.argv[1:])
