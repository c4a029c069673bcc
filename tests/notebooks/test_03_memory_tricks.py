"""Notebook 03 (memory tricks): every value it records, and its cells' counters against oracles."""

from __future__ import annotations

import gc
import importlib.util
import inspect
import json
import os
import re
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from conftest import NOTEBOOK_DIR

from freegpu.measure import interleaved_timings
from freegpu.models import build_row_transformer
from freegpu.results import COMMON_KEYS

NAME = "03_memory_tricks"
MiB = 2**20


ASSERTED = {
    "num_parameters", "memory_breakdown",
    "accumulation_max_abs_grad_diff", "accumulation_relative_grad_diff",
    "accumulation_max_abs_weight_diff", "accumulation_step_change",
    "activation_bytes_by_accumulation_steps",
    "checkpointing_activation_bytes", "checkpointing_activation_bytes_ratio",
    "checkpointing_peak_bytes", "checkpointing_peak_ratio", "checkpointing_step_times_s",
    "checkpointing_step_time_ratio", "checkpointing_step_time_resolved", "timing_clock",
    "search_device", "cap_bytes", "found_batch_size", "oom_errors", "batch_sizes_tried", "second_call_tried",
    "retry_predicate", "leak_live_bytes", "free_memory_alive_weights",
}


def _cell(start: str) -> str:
    """The source of the notebook's code cell that begins with `start` (tests run the cells' own code)."""
    nb = json.loads((NOTEBOOK_DIR / f"{NAME}.ipynb").read_text())
    sources = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    return next(src for src in sources if src.startswith(start))


def _run_cell(start: str, **names) -> dict:
    namespace = {"torch": torch, "F": F, **names}
    exec(_cell(start), namespace)
    return namespace


def test_03_every_recorded_value_is_asserted(notebook_run):
    _, results, _ = notebook_run
    assert set(results) - set(COMMON_KEYS) == ASSERTED


def test_03_where_the_memory_goes(notebook_run):
    _, results, _ = notebook_run
    mem = results["memory_breakdown"]
    assert mem["weights"] == 4 * results["num_parameters"] == mem["grads"]  # fp32, one gradient per weight
    assert 2 * mem["weights"] <= mem["optimizer_state"] < 2.01 * mem["weights"]  # AdamW: two moments (+ step)
    assert mem["activations"] > 3 * mem["weights"]  # activations dominate this model


def test_03_accumulation_equals_the_big_batch(notebook_run):
    _, results, _ = notebook_run
    p = results["parameters"]
    k = p["gradient_accumulation_steps"]
    assert results["accumulation_relative_grad_diff"] <= 1e-5
    assert 0 <= results["accumulation_max_abs_grad_diff"] < 1e-5
    assert 0 <= results["accumulation_max_abs_weight_diff"] < 1e-7
    # One step with the complete gradient: stepping per micro-batch would differ by about the step itself.
    assert results["accumulation_max_abs_weight_diff"] < 1e-3 * results["accumulation_step_change"]
    per_k = {int(kk): v for kk, v in results["activation_bytes_by_accumulation_steps"].items()}
    assert per_k[1] == results["memory_breakdown"]["activations"]  # k=1: the whole batch at once
    assert per_k[1] > per_k[2] > per_k[k]  # a smaller k (same effective batch) needs more memory
    assert 0.95 * k < per_k[1] / per_k[k] < 1.05 * k  # activations grow with the (micro-)batch


def test_03_checkpointing(notebook_run):
    _, results, _ = notebook_run
    saved = results["checkpointing_activation_bytes"]
    assert saved["plain"] == results["memory_breakdown"]["activations"]
    assert results["checkpointing_activation_bytes_ratio"] == saved["checkpointed"] / saved["plain"] <= 0.6
    times = results["checkpointing_step_times_s"]
    assert [len(times[n]) for n in ("plain", "checkpointed")] == [results["parameters"]["timing_trials"]] * 2
    assert all(t > 0 for ts in times.values() for t in ts)
    assert results["timing_clock"] == "process_time"  # CPU seconds on a CPU: load elsewhere does not count
    # A second forward of every block costs CPU time; the median ratio is recorded as a benchmark.
    assert results["checkpointing_step_time_ratio"] > 1.0
    # Resolved when every checkpointed step took longer than every plain one; only then is it a headline.
    ratios = [c / p for c, p in zip(times["checkpointed"], times["plain"], strict=True)]
    assert results["checkpointing_step_time_resolved"] == (min(ratios) > 1 or max(ratios) < 1)  # measure.compare
    assert ("checkpointing_step_time_ratio" in results["headline"]) == results["checkpointing_step_time_resolved"]


def test_03_checkpointing_judged_by_the_peak_of_the_step(notebook_run):
    """Issue 17: what the forward keeps is not what decides an out-of-memory error; the peak of the step is."""
    _, results, _ = notebook_run
    saved, peaks = results["checkpointing_activation_bytes"], results["checkpointing_peak_bytes"]
    mem = results["memory_breakdown"]
    # MemTracker counts the weights too. At the start of backward all the forward saved is alive; at its end,
    # every gradient.
    for name in ("plain", "checkpointed"):
        assert peaks[name] >= mem["weights"] + max(saved[name], mem["grads"])
    ratio = results["checkpointing_peak_ratio"]
    assert ratio == peaks["checkpointed"] / peaks["plain"] < 0.9  # it still saves memory
    # Backward brings a block's activations back: the peak shrinks less than what the forward keeps.
    assert ratio > 1.5 * results["checkpointing_activation_bytes_ratio"]
    assert "checkpointing_peak_ratio" in results["headline"]
    assert "checkpointing_activation_bytes_ratio" not in results["headline"]


def test_03_checkpointed_forward_gives_the_plain_gradients():
    """The notebook's forward_checkpointed (run from its cell) changes memory, not the gradients."""
    from torch.utils.checkpoint import checkpoint

    cell = _run_cell("from torch.utils.checkpoint import checkpoint", num_rows=8, row_features=4,
                     checkpoint=checkpoint)
    torch.manual_seed(0)
    model = build_row_transformer(8, 4, 16, 2, 3)
    x, y = torch.randn(4, 32), torch.tensor([0, 1, 2, 0])
    grads = {}
    for name, forward in {"plain": model, "checkpointed": lambda x: cell["forward_checkpointed"](model, x)}.items():
        model.zero_grad(set_to_none=True)
        loss = F.cross_entropy(forward(x), y)
        loss.backward()
        grads[name] = (loss.item(), [p.grad.clone() for p in model.parameters()])
    assert grads["plain"][0] == grads["checkpointed"][0]
    assert all(torch.equal(a, b) for a, b in zip(grads["plain"][1], grads["checkpointed"][1], strict=True))


def test_03_memtracker_peak_lies_between_its_parts():
    """Step 3's MemTracker peak on a small model: at least the weights and all the forward saved (alive when
    backward starts), at most weights, gradients, activations and generous temporaries together."""
    from torch.distributed._tools.mem_tracker import MemTracker

    torch.manual_seed(0)
    model = build_row_transformer(8, 4, 32, 2, 3)
    x, y = torch.randn(16, 32), torch.randint(0, 3, (16,))
    from freegpu.measure import SavedTensors

    with SavedTensors() as saved:
        F.cross_entropy(model(x), y)
    weights = sum(p.nbytes for p in model.parameters())
    with MemTracker() as tracker:
        F.cross_entropy(model(x), y).backward()
    peak = max(d["Total"] for d in tracker.get_tracker_snapshot("peak").values())
    assert weights + saved.activation_bytes <= peak <= 2 * weights + 3 * saved.activation_bytes


def test_03_checkpoint_sequential_returns_the_output_not_a_model():
    """The claim in step 3 (docs/zh/claims.md cites it): `checkpoint_sequential(functions, segments, input)`."""
    from torch.utils.checkpoint import checkpoint_sequential

    assert list(inspect.signature(checkpoint_sequential).parameters)[:3] == ["functions", "segments", "input"]
    with pytest.raises(TypeError):
        checkpoint_sequential(torch.nn.Sequential(torch.nn.Linear(2, 2)), chunks=4)  # as the article writes it
    assert "`checkpoint_sequential(functions, segments, input)` returns the output" in " ".join(
        _notebook_markdown().split())


def test_03_attention_saves_no_t_by_t_matrix():
    """Exercise 1's answer: activations grow linearly with the tokens T, because the encoder's attention
    (scaled_dot_product_attention, need_weights=False) saves no (B, heads, T, T) tensor for backward."""
    rows, width = 48, 32
    model = build_row_transformer(rows, 4, width, 1, 3)
    shapes = []

    def pack(tensor):
        shapes.append(tuple(tensor.shape))
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        F.cross_entropy(model(torch.randn(2, rows * 4)), torch.tensor([0, 1]))
    assert shapes and not [shape for shape in shapes if shape[-2:] == (rows, rows)], sorted(set(shapes))


def test_03_find_executable_batch_size_under_a_real_cap(notebook_run):
    _, results, out = notebook_run
    tried = results["batch_sizes_tried"]
    assert tried[0] == results["parameters"]["starting_batch_size"] and len(tried) >= 3
    assert all(b == int(a * 0.9) for a, b in zip(tried, tried[1:], strict=False))  # Accelerate 1.16's rule
    assert results["found_batch_size"] == tried[-1] < tried[0]
    errors = results["oom_errors"]
    assert len(errors) == len(tried) - 1  # every smaller size was forced by a real error
    assert all("DefaultCPUAllocator: can't allocate memory" in error for error in errors)
    assert results["second_call_tried"] == [results["found_batch_size"]]  # ran again under the cap, remembered
    assert results["cap_bytes"] > results["parameters"]["budget_mib"] * MiB and results["search_device"] == "cpu"
    assert (out / "find_batch_size.py").is_file()
    # Accelerate's own test, on the real error text: only a RuntimeError with a known message is retried.
    assert results["retry_predicate"] == {"RuntimeError(text)": True, "ValueError(text)": False,
                                          "MemoryError()": False}


def _blocked(tmp_path: Path, *modules: str) -> str:
    """A folder that, first on PYTHONPATH, makes `modules` fail to import: a machine without them."""
    for module in modules:
        (tmp_path / "blocked" / module).mkdir(parents=True)
        (tmp_path / "blocked" / module / "__init__.py").write_text(f"raise ImportError('{module} is not here')\n")
    return str(tmp_path / "blocked")


def _notebook_markdown() -> str:
    nb = json.loads((NOTEBOOK_DIR / f"{NAME}.ipynb").read_text())
    return "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")


def _search(out: Path, tmp_path: Path, *flags: str) -> dict:
    """Run step 4's script as a learner types it, where freegpu cannot be imported; return its report."""
    # Not the allocator settings of a capped run: the script sets them itself (it starts again with them).
    env = {key: value for key, value in os.environ.items()
           if key not in ("OMP_NUM_THREADS", "MALLOC_MMAP_THRESHOLD_", "LD_PRELOAD")}
    env["PYTHONPATH"] = _blocked(tmp_path, "freegpu")
    done = subprocess.run([sys.executable, str(out / "find_batch_size.py"), "--num_rows", "4", "--d_model", "16",
                           "--num_layers", "1", *flags], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(next(line[7:] for line in done.stdout.splitlines() if line.startswith("REPORT ")))


def test_03_the_search_script_runs_uncapped_as_on_a_gpu(notebook_run, tmp_path):
    """The GPU branch passes --budget_mib 0: no cap, the first size fits (a CPU has room for it)."""
    report = _search(notebook_run[2], tmp_path, "--starting_batch_size", "8", "--budget_mib", "0")
    assert report["cap_bytes"] is None and report["batch_sizes_tried"] == [8] and report["oom_errors"] == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS is enforced on Linux only")
def test_03_the_search_script_caps_itself_without_freegpu(notebook_run, tmp_path):
    """Its own cap (RLIMIT_AS from /proc/self/statm) gives the allocator error that Accelerate retries."""
    report = _search(notebook_run[2], tmp_path, "--starting_batch_size", "65536", "--budget_mib", "32")
    assert report["cap_bytes"] > 32 * MiB and report["oom_errors"] and report["found_batch_size"] < 65536
    assert all("DefaultCPUAllocator: can't allocate memory" in error for error in report["oom_errors"])
    script = (notebook_run[2] / "find_batch_size.py").read_text().splitlines()
    assert not [line for line in script if line.split()[:1] in (["import"], ["from"]) and "freegpu" in line]


def test_03_leaks_and_free_memory(notebook_run):
    _, results, _ = notebook_run
    p = results["parameters"]
    one_batch = results["memory_breakdown"]["activations"]
    kept, after_backward, as_numbers = results["leak_live_bytes"].values()
    assert kept == pytest.approx(p["leak_steps"] * one_batch, rel=0.05)  # each kept loss: one batch's graph
    assert kept - after_backward == pytest.approx(one_batch, rel=0.05)  # backward freed what its graph saved
    assert as_numbers == 0
    weights = len(list(build_row_transformer(p["num_rows"], p["row_features"], p["d_model"], p["num_layers"],
                                             10).parameters()))
    # free_memory() alone: your variables still hold everything; assigning its return value frees it
    assert list(results["free_memory_alive_weights"].values()) == [weights, 0]


def test_03_live_activations_follow_the_graph_without_a_garbage_collector():
    """The notebook's LiveActivations (run from its cell): no reference cycle keeps a graph alive."""
    import weakref

    cell = _run_cell("import weakref", weakref=weakref)
    model = build_row_transformer(8, 4, 16, 1, 3)
    x, y = torch.randn(4, 32), torch.tensor([0, 1, 2, 0])
    gc.disable()  # the count must not depend on the collector
    try:
        live = cell["LiveActivations"]()
        with live:
            loss = F.cross_entropy(model(x), y)
        assert live.live_bytes() > 0
        del loss
        assert live.live_bytes() == 0
        live = cell["LiveActivations"]()
        with live:
            loss = F.cross_entropy(model(x), y)
        loss.backward()  # backward frees what it used
        assert live.live_bytes() == 0
    finally:
        gc.enable()


def test_03_free_memory_runs_gc_and_empties_the_device_cache(monkeypatch):
    """Issue 26 item 6, as step 5 says it: `free_memory` runs gc.collect() and the device's empty_cache()
    (Accelerate told it is on CUDA) while the caller's own reference still holds the model, and returns None for it:
    only the assignment frees it, after the cache was emptied (hence step 5's second empty_cache)."""
    import weakref

    import accelerate.utils.memory as accelerate_memory
    from accelerate import Accelerator

    calls = []
    model = torch.nn.Linear(2, 2)
    alive = weakref.ref(model)

    class Cuda:
        @staticmethod
        def empty_cache():
            calls.append(("empty_cache", alive() is not None))

    accelerator = Accelerator(cpu=True)
    monkeypatch.setattr(accelerate_memory, "get_torch_accelerator_backend", lambda: ("cuda", Cuda))
    monkeypatch.setattr(accelerate_memory.gc, "collect", lambda *a: calls.append("gc.collect"))
    [model] = accelerator.free_memory(model)
    assert model is None and alive() is None  # freed by the assignment
    assert calls == ["gc.collect", ("empty_cache", True)]  # the cache was emptied while the model lived
    markdown = " ".join(_notebook_markdown().split())
    assert "runs `gc.collect()` and `torch.cuda.empty_cache()`. But it empties the cache first" in markdown


def test_03_fsdp2_needs_the_model_and_its_optimizer_in_one_prepare_call(monkeypatch):
    """Issue 26 (03 vs 05): step 2 says one `prepare` call with model and optimizer is what FSDP2 needs. Accelerate
    told it runs FSDP2 refuses an optimizer prepared without its model; one call with both passes that check."""
    from accelerate import Accelerator

    accelerator = Accelerator(cpu=True)
    monkeypatch.setattr(Accelerator, "is_fsdp2", property(lambda self: True))
    model = torch.nn.Linear(2, 2)
    with pytest.raises(ValueError, match="optimizer must be passed together with its model"):
        accelerator.prepare(torch.optim.SGD(model.parameters(), lr=0.1))
    prose = " ".join(_notebook_markdown().split())
    assert "Pass the model and its optimizer to one `prepare` call: FSDP2 requires it" in prose
    assert "accelerator.prepare(small, optimizer, loader)" in _cell("from accelerate import Accelerator")


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="transformers is not installed")
def test_03_gradient_checkpointing_enable_warns_in_the_transformers_the_notebook_names():
    """Issue 17: the notebook's claim about the deprecated name, checked in the installed transformers."""
    import transformers
    from transformers import BertConfig, BertModel

    assert re.search(rf"transformers\s+{re.escape(transformers.__version__.rsplit('.', 1)[0])}\b",
                     _notebook_markdown())
    with torch.device("meta"):
        model = BertModel(BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=37, max_position_embeddings=64))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.gradient_checkpointing_enable()
    said = [str(w.message) for w in caught if issubclass(w.category, FutureWarning)]
    assert any("gradient_checkpointing_enable" in m and "v6" in m and "activation_checkpointing_enable" in m
               for m in said), said
    prose = " ".join(_notebook_markdown().split())
    assert any(" ".join(m.split()) in prose for m in said)  # the notebook quotes the warning word for word


@pytest.mark.notebook
def test_03_what_you_measured_shows_the_headline_only(notebook_run, course_out):
    record, results, _ = notebook_run
    outputs = [o for c in json.loads((course_out / record.executed).read_text())["cells"]
               if c["cell_type"] == "code" for o in c["outputs"]]
    measured = ["".join(o["data"]["text/markdown"]) for o in outputs if "text/markdown" in o.get("data", {})][-1]
    assert re.findall(r"^\| `(\w+)` \|", measured, re.M) == results["headline"]
    assert len(results["headline"]) < len(results) // 3  # far fewer rows than values recorded


def test_interleaved_timings_uses_the_given_clock():
    ticks = iter(range(100))
    times = interleaved_timings({"a": lambda: None, "b": lambda: None}, repeats=2, warmup=1,
                               clock=lambda: next(ticks))
    assert times == {"a": [1, 1], "b": [1, 1]}
    assert interleaved_timings({"c": lambda: time.sleep(0)}, repeats=1)["c"][0] >= 0


def test_saved_tensors_counts_without_keeping_the_graph_alive():
    """The counter of notebooks 02 and 03 must not itself leak: a graph it counted is freed with the loss."""
    import weakref

    from freegpu.measure import SavedTensors

    packed = []

    class Witness(SavedTensors):
        def _pack(self, tensor):
            stored = super()._pack(tensor)  # what autograd keeps until backward or until the graph dies
            packed.append(weakref.ref(stored))
            return stored

    model = build_row_transformer(8, 4, 16, 1, 3)
    x, y = torch.randn(4, 32), torch.tensor([0, 1, 2, 0])
    gc.disable()
    try:
        with Witness() as saved:
            loss = F.cross_entropy(model(x), y)
        assert saved.activation_bytes > 0 and any(ref() is not None for ref in packed)
        del loss
        assert all(ref() is None for ref in packed)
    finally:
        gc.enable()
