"""The learner's path on a lent GPU: the full profile of notebooks 01, 02 and 05, in one run of under 10 minutes.

The lent machine cannot reach the Hugging Face Hub, so the full profile reads the folders build/hub_rehearsal.py
writes in the Hub's layout (real digits resized to 28x28, GLUE-shaped reviews, the MiniLM as the BERT model).
For each notebook it records the status, wall time, the device the run used, the GPU's peak allocated memory
(`torch.cuda.max_memory_allocated`, written by `freegpu.results` when the run used CUDA) and the samples/s the
notebook measured. Without a GPU it falls back to the CPU with the rehearsal's CPU sizes (02 at width 64, because
fp16 autocast on a CPU is emulated and takes minutes at the full width) and says so in its output.

    python build/device_check.py --out <folder>      # writes <folder>/device_check.json and prints a table
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
NOTEBOOKS = ("01_mnist_migration", "02_mixed_precision", "05_bert_finetune")
CPU_SIZES = {"02_mixed_precision": {"d_model": 64}}


def _script(name: str):
    spec = importlib.util.spec_from_file_location(f"build_{name}", HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def parameters(name: str, folders: dict[str, str], gpu: bool) -> dict:
    """The full profile on the rehearsal folders; the CPU fallback also gets the CPU sizes."""
    sources = ({"data_dir": folders["glue"], "model_name": folders["bert"]} if name.startswith("05")
               else {"data_dir": folders["mnist"]})
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


def check(out: Path, names: tuple[str, ...] = NOTEBOOKS) -> dict:
    import torch

    gpu = torch.cuda.is_available()
    runner, rehearsal = _script("run_course"), _script("hub_rehearsal")
    folders = rehearsal.write_all(out / "hub")
    summary = {"gpu": torch.cuda.get_device_name(0) if gpu else None,
               "fallback": None if gpu else "no CUDA device: the CPU ran the rehearsal's CPU sizes",
               "torch": torch.__version__, "notebooks": {}}
    start = time.perf_counter()
    for name in names:
        record = runner.execute(HERE.parent / "notebooks" / f"{name}.ipynb", out, parameters(name, folders, gpu),
                                solutions=False)
        results = json.loads((out / record.results).read_text()) if record.results else {}
        summary["notebooks"][name] = {
            "status": record.status, "error": record.error, "wall_s": record.wall_s,
            "device": results.get("device"),
            "cuda_max_memory_allocated_bytes": results.get("cuda_max_memory_allocated_bytes"),
            "samples_per_s": samples_per_s(results)}
    summary["total_s"] = round(time.perf_counter() - start, 1)
    shutil.rmtree(out / "hub", ignore_errors=True)  # 90 MB of stand-in model: not worth bringing back
    (out / "device_check.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("names", nargs="*", default=list(NOTEBOOKS))
    args = parser.parse_args(argv)
    summary = check(args.out, tuple(args.names))
    print(f"GPU: {summary['gpu'] or summary['fallback']}; torch {summary['torch']}; {summary['total_s']} s")
    for name, entry in summary["notebooks"].items():
        peak = entry["cuda_max_memory_allocated_bytes"]
        peak_text = f"peak {peak / 2**20:,.0f} MiB allocated" if peak else "no CUDA peak"
        print(f"{name:28} {entry['status']:6} {entry['wall_s']:7.1f} s  device {entry['device']}  {peak_text}",
              entry["samples_per_s"] or "", entry["error"] or "")
    return 0 if all(e["status"] == "ok" for e in summary["notebooks"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
