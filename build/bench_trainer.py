"""Notebook 05's fine-tune loop against transformers' `Trainer` on the same work, interleaved in one process.

The work (issue 18): the smoke profile's MiniLM and its 160 training reviews, batch 16, 3 epochs, peak learning
rate 2e-4 with 5 warm-up steps and linear decay, gradients clipped at 1.0, dynamic padding, the same threads.
Each arm starts from the same weights; its clock runs from a loaded model to a trained one (the Accelerator or
the Trainer, the loaders, the optimizer, the schedule, every step). One untimed round first, then `--trials`
rounds, the order reversed every other round, so that each pair of arms sees the same machine load.

    course                05's loop as taught: the notebook's own train_classifier cell, AdamW(fused=True)
    trainer               `Trainer` with its defaults (optim="adamw_torch_fused" in transformers 5)
    course_default_adamw  05's loop with AdamW's default implementation (a Python loop over tensors on a CPU)
    trainer_adamw_torch   `Trainer` with optim="adamw_torch" (that same default AdamW)

    python build/bench_trainer.py [--out build/out/bench/trainer_vs_course.json] [--trials 3]   # make bench

It prints and writes each arm's samples/s (median, min, max), the ratio course/trainer of each round, and the
same ratios for the ablation arms; the same again per CPU second of this process, which other programs sway less.
On a machine shared with busy processes, torch's OpenMP threads spin at every parallel region, waiting for a
thread that is not scheduled: there `OMP_WAIT_POLICY=PASSIVE` (recorded in the report) keeps the timings sane.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "build" / "out" / "bench" / "trainer_vs_course.json"
ARMS = ("course", "trainer", "course_default_adamw", "trainer_adamw_torch")
RATIOS = {"course/trainer": ("course", "trainer"),  # the headline: >= 1 means 05's loop is at least as fast
          "course_default_adamw/trainer": ("course_default_adamw", "trainer"),  # before issue 18
          "course_default_adamw/trainer_adamw_torch": ("course_default_adamw", "trainer_adamw_torch")}


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--trials", type=int, default=3, help="timed rounds after the untimed one (>= 3)")
    parser.add_argument("--arms", default=",".join(ARMS), help=f"comma-separated, from {','.join(ARMS)}")
    parser.add_argument("--train-samples", type=int, default=0, help="0: all 160 reviews")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--learning-rate", type=float, default=2e-4)
    parser.add_argument("--warmup-steps", type=int, default=5)
    parser.add_argument("--max-grad-norm", type=float, default=1.0)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--threads", type=int, default=0, help="torch threads for both arms (0: torch's default)")
    args = parser.parse_args(argv)
    args.arms = [a for a in args.arms.split(",") if a]
    unknown = set(args.arms) - set(ARMS)
    if unknown or not args.arms or args.trials < 3:
        parser.error(f"--arms from {ARMS} (not {sorted(unknown)}), --trials >= 3")
    return args


def load_work(args: argparse.Namespace):
    """The tokenized reviews, the starting model (its new head seeded) and a collator that counts tokens."""
    from accelerate.utils import set_seed
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, DataCollatorWithPadding
    from transformers.utils import logging as transformers_logging

    from freegpu.data import load_text_task

    task = load_text_task("smoke", max_train_samples=args.train_samples)
    tokenizer = AutoTokenizer.from_pretrained(task.model_name)
    train = task.train.map(lambda e: tokenizer(e["text"], truncation=True, max_length=args.max_length),
                           batched=True, remove_columns=["text"])
    set_seed(args.seed)
    transformers_logging.set_verbosity_error()  # the new head's "newly initialized" report, once per arm
    model = AutoModelForSequenceClassification.from_pretrained(task.model_name, num_labels=2)

    class CountingCollator(DataCollatorWithPadding):  # dynamic padding, and the tokens it made
        tokens = 0

        def __call__(self, features):
            batch = super().__call__(features)
            CountingCollator.tokens += batch["input_ids"].numel()
            return batch

    return train, model, CountingCollator(tokenizer), CountingCollator


def course_arm(model, train, collate, args, fused: bool) -> float:
    """Notebook 05's step 4 on `model`; returns the mean training loss."""
    import torch
    from accelerate import Accelerator
    from torch.utils.data import DataLoader
    from transformers import get_scheduler

    accelerator = Accelerator()
    model = accelerator.prepare(model)
    train_dataloader = DataLoader(train, batch_size=args.batch_size, shuffle=True,
                                  generator=torch.Generator().manual_seed(args.seed), collate_fn=collate)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate, fused=fused)
    steps = len(train_dataloader) * args.epochs
    lr_scheduler = get_scheduler("linear", optimizer, num_warmup_steps=args.warmup_steps, num_training_steps=steps)
    optimizer, train_dataloader, lr_scheduler = accelerator.prepare(optimizer, train_dataloader, lr_scheduler)
    losses = []  # kept on the device, read once at the end (the notebook reads them 5 at a time)
    train_classifier = taught_loop()
    train_classifier(accelerator, model, optimizer, lr_scheduler, train_dataloader, args.epochs,
                     args.max_grad_norm, losses.append)
    return statistics.mean(torch.stack(losses).tolist())


def taught_loop():
    """`train_classifier` as notebook 05's cell writes it (its text, run here)."""
    import nbformat

    notebook = nbformat.read(Path(__file__).resolve().parents[1] / "notebooks" / "05_bert_finetune.ipynb", 4)
    namespace: dict = {}
    exec(next(c.source for c in notebook.cells if c.source.startswith("def train_classifier(")), namespace)
    return namespace["train_classifier"]


def trainer_arm(model, train, collate, args, optim: str | None) -> float:
    """`Trainer` on the same work, its defaults kept (`optim=None`: its default optimizer)."""
    from transformers import PrinterCallback, Trainer, TrainingArguments

    with tempfile.TemporaryDirectory() as folder:
        chosen = {} if optim is None else {"optim": optim}
        training_args = TrainingArguments(
            output_dir=folder, per_device_train_batch_size=args.batch_size, num_train_epochs=args.epochs,
            learning_rate=args.learning_rate, warmup_steps=args.warmup_steps, lr_scheduler_type="linear",
            max_grad_norm=args.max_grad_norm, seed=args.seed, report_to="none", disable_tqdm=True,
            save_strategy="no", **chosen)
        trainer = Trainer(model=model, args=training_args, train_dataset=train, data_collator=collate)
        trainer.remove_callback(PrinterCallback)  # its closing metrics print; our own report follows
        return trainer.train().training_loss


def run_arm(name: str, model, train, collate, counter, args) -> dict:
    """One timed run of arm `name` on a fresh copy of `model`."""
    arm = {"course": lambda m: course_arm(m, train, collate, args, fused=True),
           "course_default_adamw": lambda m: course_arm(m, train, collate, args, fused=False),
           "trainer": lambda m: trainer_arm(m, train, collate, args, optim=None),
           "trainer_adamw_torch": lambda m: trainer_arm(m, train, collate, args, optim="adamw_torch")}[name]
    fresh = copy.deepcopy(model)
    counter.tokens = 0
    start, cpu_start = time.perf_counter(), time.process_time()
    loss = arm(fresh)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    samples = len(train) * args.epochs
    return {"seconds": seconds, "cpu_seconds": cpu_seconds, "samples_per_s": samples / seconds,
            "samples_per_cpu_s": samples / cpu_seconds, "tokens": counter.tokens, "mean_loss": loss}


def ratios(runs: dict[str, list[dict]], measure: str = "samples_per_s") -> dict:
    """Each ratio of `RATIOS` whose arms ran: per round (the two arms ran back to back), and of the medians."""
    from freegpu.measure import spread

    out = {}
    for key, (x, y) in RATIOS.items():
        if x in runs and y in runs:
            per_round = [a[measure] / b[measure] for a, b in zip(runs[x], runs[y], strict=True)]
            medians = [statistics.median(r[measure] for r in runs[arm]) for arm in (x, y)]
            out[key] = {**spread(per_round), "of_medians": medians[0] / medians[1]}
    return out


def bench(args: argparse.Namespace) -> dict:
    import torch
    import transformers

    from freegpu.measure import spread

    if args.threads:
        torch.set_num_threads(args.threads)
    train, model, collate, counter = load_work(args)
    runs: dict[str, list[dict]] = {name: [] for name in args.arms}
    load_before = os.getloadavg()[0]
    for trial in range(1 + args.trials):  # trial 0: imports, allocator, lazy set-up; not kept
        for name in args.arms if trial % 2 else reversed(args.arms):
            result = run_arm(name, model, train, collate, counter, args)
            print(f"round {trial}{' (untimed)' if not trial else ''} {name}: {result['samples_per_s']:.1f} "
                  f"samples/s", file=sys.stderr, flush=True)
            if trial:
                runs[name].append(result)
    arms = {name: {"samples_per_s": spread([r["samples_per_s"] for r in rs]),
                   "samples_per_cpu_s": spread([r["samples_per_cpu_s"] for r in rs]), "runs": rs}
            for name, rs in runs.items()}
    work = {k: v for k, v in vars(args).items() if k not in ("out", "arms", "trials", "threads")}
    return {"work": {**work, "train_examples": len(train), "device": "cuda" if torch.cuda.is_available() else "cpu",
                     "threads": torch.get_num_threads(), "cpus": os.cpu_count(),
                     "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "")},  # busy machines: see README
            "versions": {"python": platform.python_version(), "torch": torch.__version__,
                         "transformers": transformers.__version__, "accelerate": _version("accelerate")},
            "trials": args.trials, "arms": arms, "ratios": ratios(runs),
            "ratios_cpu": ratios(runs, "samples_per_cpu_s"),  # this process's CPU seconds: less swayed by others
            "load_1m": {"before": load_before, "after": os.getloadavg()[0]}}


def _version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


def report(result: dict) -> str:
    work, load = result["work"], result["load_1m"]
    lines = [f"{work['train_examples']} examples x {work['epochs']} epochs, batch {work['batch_size']}, "
             f"{work['threads']} threads on {work['device']} ({work['cpus']} CPUs, load {load['before']:.1f} -> "
             f"{load['after']:.1f}), {result['trials']} interleaved rounds (samples/s: median [min-max])"]
    for name, arm in result["arms"].items():
        s = arm["samples_per_s"]
        lines.append(f"  {name:22} {s['median']:7.1f} [{s['min']:.1f}-{s['max']:.1f}]")
    for key, r in result["ratios"].items():
        cpu = result["ratios_cpu"][key]
        lines.append(f"  {key:42} {r['median']:.2f} [{r['min']:.2f}-{r['max']:.2f}] per round, "
                     f"{r['of_medians']:.2f} of the medians (per CPU second: {cpu['median']:.2f} "
                     f"[{cpu['min']:.2f}-{cpu['max']:.2f}])")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    result = bench(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(report(result))
    print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
