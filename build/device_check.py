"""The learner's path on a lent GPU: every notebook's full profile and the GPU-only claims, in one run under 10 min.

    python build/device_check.py --out <folder>      # writes <folder>/device_check.json and prints a table
    python build/device_check.py --out <folder> --claims-only    # only the GPU claims (about a minute)

On a lent GPU, commit <folder>/device_check.json (a few KB) as docs/device/device_check.json; the executed notebooks
and results beside it are the evidence to read, not to commit.

Two parts, the cheap one first, so a run cut short still answers something:

1. **The claims** docs/zh/claims.md marks "需要 GPU" (only a CUDA GPU can check them), measured on one model: a small
   Transformer encoder trained on a synthetic task for a fixed number of steps, through Accelerate with
   `mixed_precision="no"` and `"fp16"` (and `"bf16"` where the GPU has bf16 tensor cores), plus the plain PyTorch
   loop without Accelerate. Per mode: median step time, `torch.cuda.max_memory_allocated`, held-out accuracy. The
   ratios answer "显存占用减少35-45%", "训练速度提升1.8-2.3倍", "精度损失通常小于0.5%", "混合精度场景提升显著" and
   "单卡场景下Accelerate几乎没有开销" for this GPU (the T4 row needs a T4). With two GPUs it also launches the same
   model on both (`accelerate launch --multi_gpu`, the same batch per process) for "小模型上双卡甚至可能比单卡慢";
   with one, that is recorded as "not measured: needs two GPUs".
2. **Every notebook's full profile** (notebooks/NN_*.ipynb). The lent machine cannot reach the Hugging Face Hub, so
   the full profile reads the folders build/hub_rehearsal.py writes in the Hub's layout (real digits resized to
   28x28, GLUE-shaped reviews, the MiniLM as the BERT model). Per notebook: status, wall time, the device the run
   used, the GPU's peak allocated memory (written by `freegpu.results` when the run used CUDA) and the samples/s it
   measured; its results.json is kept beside device_check.json. A notebook not started within `--budget-s` is
   recorded as skipped, so the command ends within the device's 10-minute limit.

Without a GPU it falls back to the CPU, says so in its output, and runs the claims at a tiny size with `"bf16"`
in place of `"fp16"` (Accelerate's fp16 does nothing on a CPU) and the notebooks at the rehearsal's CPU sizes (02
at width 64: fp16 autocast on a CPU is emulated and takes minutes at the full width).
tests/tooling/test_device_check.py runs that fallback.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
NOTEBOOKS = tuple(sorted(p.stem for p in (HERE.parent / "notebooks").glob("[0-9][0-9]_*.ipynb")))
CPU_SIZES = {"02_mixed_precision": {"d_model": 64}}
BUDGET_S = 540  # start no notebook after this: the lent machine's command limit is 600 s
# The claims' model: big enough that a GPU step is not all launch overhead, small enough for seconds per mode.
GPU_SIZE = {"d_model": 512, "layers": 4, "heads": 8, "seq": 128, "batch": 64, "steps": 200, "eval": 1024, "lr": 3e-4}
CPU_SIZE = {"d_model": 32, "layers": 1, "heads": 2, "seq": 16, "batch": 16, "steps": 8, "eval": 64, "lr": 3e-4}


def parameters(name: str, folders: dict[str, str], gpu: bool) -> dict:
    """The full profile on the rehearsal folders (as tests/conftest.py's full_parameters); the CPU fallback also
    gets the CPU sizes."""
    if name.startswith("05"):
        sources = {"data_dir": folders["glue"], "model_name": folders["bert"]}
    elif name[:2] in ("01", "02", "04", "06"):
        sources = {"data_dir": folders["mnist"]}
    else:  # 00, 03 and 07 read nothing from the Hub
        sources = {}
    return {"profile": "full", **sources, **({} if gpu else CPU_SIZES.get(name, {}))}


def samples_per_s(results: dict) -> dict[str, float]:
    """The throughputs a notebook measured (every recorded `*samples_per_s*` number or median), by key."""
    found = {}
    for key, value in results.items():
        if "samples_per_s" not in key:
            continue
        if isinstance(value, (int, float)):
            found[key] = value
        elif isinstance(value, dict) and isinstance(value.get("median"), (int, float)):
            found[key] = value["median"]
    return found


# ------------------------------------------------------------------------------------------------ the claims
def _batch(size: dict, index: int, n: int):
    """Batch `index` of a synthetic task a small Transformer can learn: the label is the side of a fixed random
    direction the sequence's mean token falls on. Made from its own seed, so every mode sees the same batches."""
    import torch

    x = torch.randn(n, size["seq"], size["d_model"], generator=torch.Generator().manual_seed(1000 + index))
    direction = torch.randn(size["d_model"], generator=torch.Generator().manual_seed(1))
    return x, (x.mean(dim=1) @ direction > 0).long()


def _model(size: dict):
    import torch

    class MeanPool(torch.nn.Module):
        def forward(self, x):
            return x.mean(dim=1)

    layer = torch.nn.TransformerEncoderLayer(size["d_model"], size["heads"], 4 * size["d_model"], dropout=0.0,
                                             batch_first=True)
    return torch.nn.Sequential(torch.nn.TransformerEncoder(layer, size["layers"], enable_nested_tensor=False),
                               MeanPool(), torch.nn.Linear(size["d_model"], 2))


def train_one(mode: str, size: dict, device_type: str) -> dict:
    """Train the claims' model for size["steps"] steps; `mode` is "plain" (PyTorch alone, fp32) or an Accelerate
    `mixed_precision` value. Returns the median step time, peak allocated memory and held-out accuracy."""
    import torch
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState, GradientState

    torch.manual_seed(0)  # the same start weights in every mode
    model = _model(size)
    optimizer = torch.optim.AdamW(model.parameters(), lr=size["lr"])
    cuda = device_type == "cuda"
    world, rank = 1, 0
    if mode == "plain":
        device = torch.device(device_type)
        model.to(device)
        backward = torch.Tensor.backward
    else:
        AcceleratorState._reset_state(True)  # one Accelerator per mode in this process
        GradientState._reset_state()
        accelerator = Accelerator(mixed_precision=mode, cpu=not cuda)
        # the prepared model's forward runs under autocast; accelerator.backward scales the loss under fp16
        model, optimizer = accelerator.prepare(model, optimizer)
        device, backward = accelerator.device, accelerator.backward
        world, rank = accelerator.num_processes, accelerator.process_index  # two processes: each its own batches
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    times = []
    for index in range(size["steps"]):
        inputs, targets = (t.to(device) for t in _batch(size, index * world + rank, size["batch"]))
        start = time.perf_counter()
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(inputs), targets)
        backward(loss)
        optimizer.step()
        if cuda:
            torch.cuda.synchronize()  # the step is done when the GPU is, not when Python returns
        times.append(time.perf_counter() - start)
    model.eval()
    inputs, targets = _batch(size, -1, size["eval"])  # held out: a seed no training batch uses
    with torch.no_grad():
        logits = model(inputs.to(device))
    accuracy = (logits.argmax(dim=1).cpu() == targets).float().mean().item()
    warm = times[len(times) // 4:]  # the first steps pay for kernel selection and allocation
    median = statistics.median(warm)
    return {"processes": world, "median_step_ms": round(median * 1000, 3),
            "samples_per_s": round(size["batch"] * world / median, 1),
            "peak_allocated_mib": round(torch.cuda.max_memory_allocated() / 2**20, 1) if cuda else None,
            "accuracy": round(accuracy, 4), "final_loss": round(loss.item(), 4)}


_WORKER = """import json, os, sys
sys.path.insert(0, sys.argv[1])  # the repository root: build.device_check is the measurement
from build.device_check import train_one
result = train_one(sys.argv[2], json.loads(sys.argv[3]), sys.argv[4])
with open(sys.argv[5] + "_" + os.environ.get("RANK", "0") + ".json", "w") as f:
    json.dump(result, f)
"""


def two_processes(mode: str, size: dict, gpu: bool, folder: Path) -> dict:
    """The claims' model in two processes (`accelerate launch`, one per GPU; two gloo processes on a CPU), each
    with the per-process batch of the one-process run: rank 0's result, or the launcher's error."""
    folder.mkdir(parents=True, exist_ok=True)
    worker = folder / "two_processes.py"
    worker.write_text(_WORKER)
    # --multi_gpu is torchrun's two processes; on a CPU, each Accelerator(cpu=True) joins them with gloo
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
           "--num_machines", "1", "--main_process_port", "0", "--mixed_precision", mode,
           str(worker), str(HERE.parent), mode, json.dumps(size), "cuda" if gpu else "cpu",
           str(folder / "two_processes")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    report = folder / "two_processes_0.json"
    if done.returncode != 0 or not report.is_file():
        return {"error": (done.stderr or done.stdout)[-1500:]}
    return json.loads(report.read_text())


def claims(gpu: bool, folder: Path | None = None) -> dict:
    """The claims' measurements on this machine: every mode, then the ratios each claim is judged by; with two GPUs
    (and a `folder` for the launched script), the same model on both against one."""
    import torch

    size, device_type = (GPU_SIZE, "cuda") if gpu else (CPU_SIZE, "cpu")
    half = "fp16" if gpu else "bf16"  # Accelerate's fp16 does nothing on a CPU
    modes = ["plain", "no", half]
    if gpu and torch.cuda.is_bf16_supported(including_emulation=False):
        modes.append("bf16")
    runs = {mode: train_one(mode, size, device_type) for mode in modes}
    fp32, mixed = runs["no"], runs[half]
    ratios = {
        f"speedup_{half}_vs_fp32": round(fp32["median_step_ms"] / mixed["median_step_ms"], 3),
        f"accuracy_change_{half}_vs_fp32": round(mixed["accuracy"] - fp32["accuracy"], 4),
        "accelerate_step_vs_plain": round(fp32["median_step_ms"] / runs["plain"]["median_step_ms"], 3),
    }
    if gpu:
        ratios[f"memory_saved_{half}_vs_fp32"] = round(1 - mixed["peak_allocated_mib"] / fp32["peak_allocated_mib"], 3)
    count = torch.cuda.device_count() if gpu else 0
    two = "not measured: needs two GPUs"
    if count >= 2 and folder is not None:
        two = two_processes(half, size, gpu, folder)
        if "samples_per_s" in two:  # "双卡甚至可能比单卡慢": samples per second, both GPUs against one
            ratios[f"two_gpus_vs_one_{half}"] = round(two["samples_per_s"] / mixed["samples_per_s"], 3)
    return {"size": size, "modes": runs, "ratios": ratios, "gpus": count, "two_gpus": two}


# ------------------------------------------------------------------------------------------------ the notebooks
def check(out: Path, names: tuple[str, ...] = NOTEBOOKS, budget_s: float = BUDGET_S, with_claims: bool = True) -> dict:
    import torch

    gpu = torch.cuda.is_available()
    out.mkdir(parents=True, exist_ok=True)
    summary = {"gpu": torch.cuda.get_device_name(0) if gpu else None,
               "fallback": None if gpu else "no CUDA device: the CPU ran the rehearsal's CPU sizes",
               "torch": torch.__version__, "claims": None, "notebooks": {}}
    start = time.perf_counter()
    if with_claims:
        summary["claims"] = claims(gpu, out / "two_gpus")
    folders = None
    for name in names:
        if time.perf_counter() - start > budget_s:
            summary["notebooks"][name] = {"status": "skipped", "error": f"not started: past {budget_s:.0f} s",
                                          "wall_s": 0.0, "device": None, "cuda_max_memory_allocated_bytes": None,
                                          "samples_per_s": {}, "results": None}
            continue
        if folders is None:
            from build import hub_rehearsal as rehearsal
            from build import run_course as runner

            folders = rehearsal.write_all(out / "hub")
        record = runner.execute(HERE.parent / "notebooks" / f"{name}.ipynb", out, parameters(name, folders, gpu),
                                solutions=False)
        results = json.loads((out / record.results).read_text()) if record.results else {}
        summary["notebooks"][name] = {
            "status": record.status, "error": record.error, "wall_s": record.wall_s,
            "device": results.get("device"),
            "cuda_max_memory_allocated_bytes": results.get("cuda_max_memory_allocated_bytes"),
            "samples_per_s": samples_per_s(results), "results": record.results}
    shutil.rmtree(out / "hub", ignore_errors=True)  # 90 MB of stand-in model: not worth bringing back
    summary["total_s"] = round(time.perf_counter() - start, 1)
    (out / "device_check.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--budget-s", type=float, default=BUDGET_S, help="start no notebook after this many seconds")
    parser.add_argument("--claims-only", action="store_true", help="measure the GPU claims, run no notebook")
    parser.add_argument("--no-claims", action="store_true", help="run the notebooks only")
    parser.add_argument("names", nargs="*", default=list(NOTEBOOKS))
    args = parser.parse_args(argv)
    names = () if args.claims_only else tuple(args.names)
    summary = check(args.out, names, args.budget_s, with_claims=not args.no_claims)
    print(f"GPU: {summary['gpu'] or summary['fallback']}; torch {summary['torch']}; {summary['total_s']} s")
    if summary["claims"]:
        for mode, run in summary["claims"]["modes"].items():
            print(f"claims model {mode:6} {run['median_step_ms']:9.2f} ms/step  peak {run['peak_allocated_mib']} MiB"
                  f"  accuracy {run['accuracy']:.4f}")
        print("ratios:", json.dumps(summary["claims"]["ratios"]), "| two GPUs:", summary["claims"]["two_gpus"])
    for name, entry in summary["notebooks"].items():
        peak = entry["cuda_max_memory_allocated_bytes"]
        peak_text = f"peak {peak / 2**20:,.0f} MiB allocated" if peak else "no CUDA peak"
        print(f"{name:28} {entry['status']:7} {entry['wall_s']:7.1f} s  device {entry['device']}  {peak_text}",
              entry["samples_per_s"] or "", entry["error"] or "")
    return 0 if all(e["status"] == "ok" for e in summary["notebooks"].values()) else 1


if __name__ == "__main__":
    sys.path.insert(0, str(HERE.parent))  # the siblings import as build.<name>, as in the tests
    sys.exit(main())
