"""Run this first on a new cluster: every rank must print the world size. Launch like train.py."""
import torch
import torch.distributed as dist

gpu = torch.cuda.is_available()
dist.init_process_group("nccl" if gpu else "gloo")  # reads RANK, WORLD_SIZE, MASTER_ADDR/PORT
rank = dist.get_rank()
x = torch.ones(1, device=f"cuda:{rank % torch.cuda.device_count()}" if gpu else "cpu")
dist.all_reduce(x)  # the sum of one 1 from every rank
print(f"rank {rank}/{dist.get_world_size()}: all_reduce {x.item():.0f}", flush=True)
dist.destroy_process_group()
