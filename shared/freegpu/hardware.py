"""What hardware did we get, what is it good at, and what should Accelerate be told?

Introduced in notebook 00 (environment check). Nothing here initialises CUDA or the XLA runtime in the notebook
process: GPUs are read with `nvidia-smi` and TPUs from the environment, because a CUDA context (or an XLA runtime)
created before `notebook_launcher` forks breaks every child process (notebook 01).
"""

from __future__ import annotations

import glob
import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
from dataclasses import dataclass

__all__ = [
    "FREE_GPUS",
    "GpuInfo",
    "TpuInfo",
    "HardwareInfo",
    "Recommendation",
    "detect_hardware",
    "recommend",
    "dataloader_workers",
]

_SMI_QUERY = ["nvidia-smi", "--query-gpu=name,memory.total,compute_cap,driver_version",
              "--format=csv,noheader,nounits"]

_T4 = "Tesla T4, 15360, 7.5, 550.54"  # nvidia-smi's name, MiB, compute capability, driver
# The GPUs Colab and Kaggle hand out (Kaggle's P100 is retired: notebook 06), as `nvidia-smi` prints them: the one
# home of the simulated GPU boxes of notebooks 00 and 02.
FREE_GPUS = {"Colab T4": _T4, "Kaggle GPU T4 x2": f"{_T4}\n{_T4}", "Colab Pro L4": "NVIDIA L4, 23034, 8.9, 550.54",
             "Colab Pro A100": "NVIDIA A100-SXM4-40GB, 40960, 8.0, 550.54"}


@dataclass(frozen=True)
class GpuInfo:
    """One CUDA GPU as `nvidia-smi` reports it."""

    name: str
    memory_gib: float
    compute_capability: tuple[int, int]
    driver: str

    @property
    def fp16_tensor_cores(self) -> bool:
        return self.compute_capability >= (7, 0)  # Volta and newer

    @property
    def bf16_tensor_cores(self) -> bool:
        return self.compute_capability >= (8, 0)  # Ampere and newer; T4 (7.5) only emulates bf16


@dataclass(frozen=True)
class TpuInfo:
    """A TPU host seen from the environment, without starting the XLA runtime."""

    torch_xla_version: str | None
    pjrt_device: str | None
    accelerator_type: str | None
    chips: int


@dataclass(frozen=True)
class HardwareInfo:
    """CPU, memory, GPUs and TPU of this machine (see `detect_hardware`)."""

    logical_cpus: int
    physical_cpus: int
    ram_total_gib: float
    ram_available_gib: float
    gpus: tuple[GpuInfo, ...] = ()
    nvlink: bool | None = None
    tpu: TpuInfo | None = None
    torch_cuda: str | None = None

    @property
    def device_kind(self) -> str:
        """`tpu`, `cuda` or `cpu`: the accelerator a full-profile run would train on."""
        if self.tpu is not None and self.tpu.chips > 0:
            return "tpu"
        return "cuda" if self.gpus else "cpu"


@dataclass(frozen=True)
class Recommendation:
    """Settings derived from `HardwareInfo` (the rules: `recommend`'s docstring; notebook 00 prints why)."""

    mixed_precision: str
    num_processes: int
    num_workers: int


def parse_nvidia_smi(text: str) -> tuple[GpuInfo, ...]:
    """Parse `nvidia-smi --query-gpu=name,memory.total,compute_cap,driver_version --format=csv,noheader,nounits`."""
    gpus = []
    for line in text.strip().splitlines():
        name, mem_mib, cap, driver = (part.strip() for part in line.split(","))
        major, minor = cap.split(".")
        gpus.append(GpuInfo(name, round(float(mem_mib) / 1024, 1), (int(major), int(minor)), driver))
    return tuple(gpus)


def _run(cmd: list[str]) -> str | None:
    if shutil.which(cmd[0]) is None:
        return None
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=20, check=True).stdout
    except (subprocess.SubprocessError, OSError):
        return None


def _detect_tpu(environ: dict[str, str]) -> TpuInfo | None:
    xla = importlib.util.find_spec("torch_xla") is not None
    accel_type = environ.get("TPU_ACCELERATOR_TYPE")  # e.g. v5litepod-8 on a TPU VM
    devices = glob.glob("/dev/accel*") or glob.glob("/dev/vfio/[0-9]*")
    if not (xla or accel_type or devices):
        return None
    chips = len(devices)
    if accel_type and (match := re.search(r"-(\d+)$", accel_type)):
        chips = int(match.group(1))
    version = importlib.metadata.version("torch_xla") if xla else None
    return TpuInfo(version, environ.get("PJRT_DEVICE"), accel_type, chips)


def detect_hardware(environ: dict[str, str] | None = None, nvidia_smi: str | None = None,
                    topology: str | None = None) -> HardwareInfo:
    """Read CPUs, RAM, GPUs (`nvidia-smi`) and TPU signals. Pass `nvidia_smi`/`topology` text to simulate a GPU box.

    Introduced in notebook 00.
    """
    import psutil
    import torch

    env = os.environ if environ is None else environ
    smi = nvidia_smi if nvidia_smi is not None else _run(_SMI_QUERY)
    gpus = parse_nvidia_smi(smi) if smi else ()
    nvlink = None
    if len(gpus) > 1:
        topo = topology if topology is not None else _run(["nvidia-smi", "topo", "-m"])
        nvlink = bool(topo and re.search(r"\bNV\d+\b", topo)) if topo is not None else None
    memory = psutil.virtual_memory()
    return HardwareInfo(
        logical_cpus=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1,
        physical_cpus=psutil.cpu_count(logical=False) or 1,
        ram_total_gib=round(memory.total / 1024**3, 1),
        ram_available_gib=round(memory.available / 1024**3, 1),
        gpus=gpus,
        nvlink=nvlink,
        tpu=_detect_tpu(env),
        torch_cuda=torch.version.cuda,
    )


def dataloader_workers(logical_cpus: int, num_processes: int = 1) -> int:
    """DataLoader workers per training process for CPU-heavy loading (00 recommends it, 04 measures it).

    The cores are split between the training processes; each process gives all of its share to workers when that
    is at least two cores. With one core per process a worker would share that core with the loop, so the rule
    says 0. Notebook 04 measures the counts around the rule on CPU-bound loading with no model step (on a machine
    busy with other work, 0 can win); with a GPU step to overlap, one worker can pay off, so measure with your own
    training step. The articles' "4 x cores" starts processes that only queue for the same cores.
    """
    per_process = max(1, logical_cpus // max(1, num_processes))
    return per_process if per_process >= 2 else 0


def recommend(hw: HardwareInfo) -> Recommendation:
    """Mixed precision, processes and DataLoader workers for this hardware (00; 02 and 05 use it).

    - TPU: fp32 (`"no"`), one process per chip. Accelerate's bf16 on a TPU stores the weights in bf16, where small
      updates round away; at XLA's default precision a TPU multiplies fp32 matrices in bf16 anyway.
    - GPU: the tensor cores of the oldest GPU decide. Compute capability >= 8.0 (Ampere): bf16 tensor cores, no
      loss scaling. 7.x (Volta, Turing: the T4): fp16 tensor cores, no bf16 ones. Below 7.0: no tensor cores,
      `"no"`. One process per GPU.
    - CPU: `"no"`, one process (several CPU processes share the same cores). Accelerate's fp16 does nothing on a
      CPU; whether bf16 autocast is faster depends on the CPU (AVX512-BF16, AMX): time it on yours.
    - Workers: `dataloader_workers(cpus, processes)`.
    """
    procs = max(hw.tpu.chips, 1) if hw.device_kind == "tpu" else max(len(hw.gpus), 1)
    caps = [gpu.compute_capability for gpu in hw.gpus]
    # TPU: Accelerate's bf16 sets XLA_USE_BF16=1 (accelerate/state.py, AcceleratorState.__init__; pinned by
    # tests/package/test_tpu_facts.py). XLA's default matmul precision rounds fp32 inputs to bf16
    # (torch_xla/backends/__init__.py, set_mat_mul_precision's docstring). CPU: fp16 gets no autocast and no
    # GradScaler (accelerate/accelerator.py; tests/package/test_hardware.py).
    precision = "no"
    if hw.device_kind != "tpu" and caps:
        precision = "bf16" if min(caps) >= (8, 0) else "fp16" if min(caps) >= (7, 0) else "no"
    return Recommendation(precision, procs, dataloader_workers(hw.logical_cpus, procs))
