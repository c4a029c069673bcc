# Worked solutions to the exercises of notebook 01.
# The build runs them after the notebook, in its kernel.

# %% Exercise 1
from accelerate.data_loader import BatchSamplerShard
from torch.utils.data import BatchSampler, SequentialSampler


def gathered(size, processes, batch):
    """What plain `gather` returns for an eval set of `size` samples (even_batches shards)."""
    batches = BatchSampler(SequentialSampler(range(size)), batch, drop_last=False)
    return sum(len(b) for rank in range(processes)
               for b in BatchSamplerShard(batches, processes, rank, even_batches=True))


exact = [size for size in range(1, 1025) if gathered(size, 2, 64) == size]
assert exact == list(range(128, 1025, 128)), f"exact sizes: {exact[:6]}..."
counted = run.values["gather_count"]
assert gathered(len(data.eval), num_processes, batch_size) == counted, "not this run's count"
print(f"gather returns exactly the eval set only for multiples of 2 x 64 = 128 samples "
      f"({exact[:3]}, ...). Here: {len(data.eval)} samples, gather gave {counted}: as predicted.")

# %% Exercise 2
def steps_per_process(size, processes, batch):
    batches = BatchSampler(SequentialSampler(range(size)), batch, drop_last=False)
    return len(BatchSamplerShard(batches, processes, 0, even_batches=True))


one_process = steps_per_process(len(data.train), 1, batch_size)
matching = [b for b in range(1, batch_size + 1)
            if steps_per_process(len(data.train), num_processes, b) == one_process]
recorded = run.values["ddp_steps_per_rank"][0] // num_epochs
half = batch_size // num_processes
assert steps_per_process(len(data.train), num_processes, batch_size) == recorded, "not this run's"
assert half in matching, f"{half} not in {matching}"
print(f"One process takes {one_process} steps per epoch with --batch_size {batch_size}; "
      f"{num_processes} processes take {recorded}. With --batch_size {half} (same global batch) "
      f"each takes {one_process}: torchrun --standalone --nproc_per_node {num_processes} "
      f"train_mnist.py --cpu --batch_size {half} ...")

# %% Exercise 3
def train_plain_clipped(model, dataset, num_epochs, batch_size, learning_rate, seed):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
    generator = torch.Generator().manual_seed(seed)
    dataloader = DataLoader(dataset, batch_size=batch_size, shuffle=True, generator=generator)
    losses = []
    for epoch in range(num_epochs):
        for inputs, targets in dataloader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(inputs.to(device)), targets.to(device))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)  # NEW
            optimizer.step()
            losses.append(loss.detach())  # stays on the device, as in the notebook
    return torch.stack(losses).tolist()


def train_accelerate_clipped(accelerator, model, dataset, num_epochs, batch_size, learning_rate,
                             seed):
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
    generator = torch.Generator().manual_seed(seed)
    dataloader = DataLoader(dataset, batch_size=batch_size, shuffle=True, generator=generator)
    model, optimizer, dataloader = accelerator.prepare(model, optimizer, dataloader)
    losses = []
    for epoch in range(num_epochs):
        for inputs, targets in dataloader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(inputs), targets)
            accelerator.backward(loss)
            accelerator.clip_grad_norm_(model.parameters(), 0.5)  # NEW
            optimizer.step()
            losses.append(loss.detach())  # stays on the device, as in the notebook
    return torch.stack(losses).tolist()


one_epoch = (1, *recipe[1:])  # one epoch is enough for the proof
set_seed(seed)
clipped_plain = build_mlp(*dims)
clipped_plain_losses = train_plain_clipped(clipped_plain, data.train, *one_epoch)
set_seed(seed)
clipped = build_mlp(*dims)
# Accelerator() picks the plain loop's device (the GPU if there is one): one device on both sides.
clipped_losses = train_accelerate_clipped(Accelerator(), clipped, data.train, *one_epoch)
losses_pairs = zip(clipped_plain_losses, clipped_losses, strict=True)
weight_pairs = zip(clipped_plain.parameters(), clipped.parameters(), strict=True)
clipped_proof = {"max_abs_loss_diff": max(abs(a - b) for a, b in losses_pairs),
                 "max_abs_weight_diff": max((p.cpu() - q.cpu()).abs().max().item()
                                            for p, q in weight_pairs)}
devices = sorted({str(next(m.parameters()).device) for m in (clipped_plain, clipped)})
assert clipped_plain_losses != plain_losses[:len(clipped_plain_losses)], "clipping changed nothing"
if devices == ["cpu"]:  # the same ops in the same order on a CPU: the same bits
    assert not any(clipped_proof.values()), f"not exact with clipping: {clipped_proof}"
else:  # GPU kernels may round differently (step 3); a TPU session runs both loops on its host CPU
    assert clipped_proof["max_abs_loss_diff"] < 1e-3, f"too far apart: {clipped_proof}"
print(f"With clipping the losses change; on {devices} the proof gives {clipped_proof}.")

# %% Exercise 4
from accelerate import notebook_launcher

# The launcher's own branches, from the installed Accelerate: TPU, Colab in the kernel, else a fork.
branches = [line.strip() for line in inspect.getsource(notebook_launcher).splitlines()
            if line.strip().startswith(("if (in_colab or in_kaggle)", "elif in_colab",
                                        "if num_processes > 1"))]
assert len(branches) == 3, branches
print("notebook_launcher's branches:\n  " + "\n  ".join(branches))
kaggle_t4x2 = {"KAGGLE_KERNEL_RUN_TYPE": "Interactive"}
kaggle = launch.launcher_branch(2, gpu_count=2, environ=kaggle_t4x2, shell="")
assert (kaggle.name, kaggle.processes, kaggle.in_process) == ("multi_gpu", 2, False), kaggle
print(f"Kaggle, no TPU variable, not Colab, 2 processes: the fork branch. launcher_branch agrees: "
      f"{kaggle.name}, {kaggle.processes} processes, one per GPU, joined by NCCL. "
      "A cell that touched CUDA before step 4 would make the forked processes fail: "
      "'Cannot re-initialize CUDA in forked subprocess'.")
