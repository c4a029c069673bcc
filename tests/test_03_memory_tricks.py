"""Notebook 03 (memory tricks): every value it records, and the freegpu.memory helpers against oracles."""

from __future__ import annotations

import gc
import importlib.util
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

from freegpu import memory
from freegpu.measure import interleaved_timings
from freegpu.models import build_row_transformer
from freegpu.results import COMMON_KEYS

NAME = "03_memory_tricks"
MiB = 2**20


ASSERTED = {
    "num_parameters", "cuda_peak_step_bytes", "memory_breakdown", "activations_by_seq_len",
    "activation_growth_batch_x2", "activation_growth_seq_x2",
    "accumulation_max_abs_grad_diff", "accumulation_relative_grad_diff",
    "accumulation_max_abs_weight_diff", "accumulation_step_change",
    "activation_bytes_by_accumulation_steps",
    "checkpointing_activation_bytes", "checkpointing_activation_bytes_ratio",
    "checkpointing_same_loss", "checkpointing_max_abs_grad_diff", "checkpointing_step_times_s",
    "checkpointing_step_time_ratio", "checkpointing_step_time_resolved", "timing_clock",
    "found_batch_size",
    "batch_sizes_tried", "budget_bytes", "cap_bytes", "oom_errors", "oom_error_first", "search_follows_x09",
    "second_call_tried", "search_device", "retry_predicate", "batch_search_ran", "batch_search_reason",
    "leak_growth_bytes", "no_leak_growth_bytes", "train_loop_leak_growth_bytes", "leak_live_bytes_per_step",
    "free_memory_alive_bytes", "checkpointing_peak_bytes", "checkpointing_backward_peak_ratio",
}


def test_03_every_recorded_value_is_asserted(notebook_run):
    _, results, _ = notebook_run
    assert set(results) - set(COMMON_KEYS) == ASSERTED


def test_03_where_the_memory_goes(notebook_run):
    _, results, _ = notebook_run
    p = results["parameters"]
    mem = results["memory_breakdown"]
    assert mem["weights"] == 4 * results["num_parameters"] == mem["grads"]  # fp32, one gradient per weight
    assert 2 * mem["weights"] <= mem["optimizer_state"] < 2.01 * mem["weights"]  # AdamW: two moments (+ step)
    per_batch = {int(b): v for b, v in mem["activations_per_batch"].items()}
    assert sorted(per_batch) == [p["batch_size"] // 2, p["batch_size"], 2 * p["batch_size"]]
    assert per_batch[p["batch_size"]] > 3 * mem["weights"]  # activations dominate this model
    assert 1.95 < results["activation_growth_batch_x2"] < 2.05
    assert per_batch[2 * p["batch_size"]] / per_batch[p["batch_size"]] == results["activation_growth_batch_x2"]
    by_rows = {int(t): v for t, v in results["activations_by_seq_len"].items()}
    assert by_rows[p["num_rows"]] == per_batch[p["batch_size"]]
    assert 1.9 < results["activation_growth_seq_x2"] == by_rows[2 * p["num_rows"]] / by_rows[p["num_rows"]]
    assert results["cuda_peak_step_bytes"] is None  # no CUDA here: not run, and recorded as such


def test_03_accumulation_equals_the_big_batch(notebook_run):
    _, results, _ = notebook_run
    k = results["parameters"]["gradient_accumulation_steps"]
    assert results["accumulation_relative_grad_diff"] <= 1e-5
    assert 0 <= results["accumulation_max_abs_grad_diff"] < 1e-5
    assert 0 <= results["accumulation_max_abs_weight_diff"] < 1e-7
    # One step with the complete gradient: stepping per micro-batch would differ by about the step itself.
    assert results["accumulation_max_abs_weight_diff"] < 1e-3 * results["accumulation_step_change"]
    per_k = {int(kk): v for kk, v in results["activation_bytes_by_accumulation_steps"].items()}
    assert per_k[1] > per_k[2] > per_k[k]  # a smaller k (same effective batch) needs more memory
    assert 0.95 * k < per_k[1] / per_k[k] < 1.05 * k


def test_03_checkpointing(notebook_run):
    _, results, _ = notebook_run
    saved = results["checkpointing_activation_bytes"]
    assert saved["plain"] == results["memory_breakdown"]["activations_per_batch"][
        str(results["parameters"]["batch_size"])]
    assert results["checkpointing_activation_bytes_ratio"] == saved["checkpointed"] / saved["plain"] <= 0.6
    assert results["checkpointing_same_loss"] is True and results["checkpointing_max_abs_grad_diff"] < 1e-6
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


def test_03_checkpointing_judged_by_the_backward_peak(notebook_run):
    """Issue 17: what the forward keeps is not what decides an out-of-memory error; the peak during backward is."""
    _, results, _ = notebook_run
    saved, peaks = results["checkpointing_activation_bytes"], results["checkpointing_peak_bytes"]
    grads = results["memory_breakdown"]["grads"]
    for name in ("plain", "checkpointed"):
        assert set(peaks[name]) == {"forward", "backward"}
        # At the start of backward everything the forward saved is alive; at its end, every gradient.
        assert peaks[name]["backward"] >= max(saved[name], grads)
        assert peaks[name]["forward"] >= saved[name]
    ratio = results["checkpointing_backward_peak_ratio"]
    assert ratio == peaks["checkpointed"]["backward"] / peaks["plain"]["backward"] < 0.9  # it still saves memory
    # Backward brings a block's activations back: the peak shrinks less than what the forward keeps.
    assert ratio > 1.5 * results["checkpointing_activation_bytes_ratio"]
    assert "checkpointing_backward_peak_ratio" in results["headline"]
    assert "checkpointing_activation_bytes_ratio" not in results["headline"]


def test_03_find_executable_batch_size_under_a_real_cap(notebook_run):
    _, results, out = notebook_run
    assert results["batch_search_ran"] is True and "RLIMIT_AS" in results["batch_search_reason"]
    tried = results["batch_sizes_tried"]
    assert tried[0] == results["parameters"]["starting_batch_size"] and len(tried) >= 3
    assert all(b == int(a * 0.9) for a, b in zip(tried, tried[1:], strict=False))  # Accelerate 1.16's rule
    assert results["search_follows_x09"] is True
    assert results["found_batch_size"] == tried[-1] < tried[0]
    assert results["oom_errors"] == len(tried) - 1  # every smaller size was forced by a real error
    assert "DefaultCPUAllocator: can't allocate memory" in results["oom_error_first"][0]
    assert results["second_call_tried"] == [results["found_batch_size"]]  # ran again under the cap, remembered
    assert results["budget_bytes"] == results["parameters"]["budget_mib"] * MiB
    assert results["cap_bytes"] > results["budget_bytes"] and results["search_device"] == "cpu"
    assert (out / "find_batch_size.py").is_file()
    # Accelerate's own test, on the real error text: only a RuntimeError with a known message is retried.
    assert results["retry_predicate"] == {"this RuntimeError": True, "the same text in a ValueError": False,
                                          "MemoryError()": False}


def _blocked(tmp_path: Path, *modules: str) -> str:
    """A folder that, first on PYTHONPATH, makes `modules` fail to import: a machine without them."""
    for module in modules:
        (tmp_path / "blocked" / module).mkdir(parents=True)
        (tmp_path / "blocked" / module / "__init__.py").write_text(f"raise ImportError('{module} is not here')\n")
    return str(tmp_path / "blocked")


def _notebook_markdown() -> str:
    nb = json.loads((Path(__file__).parents[1] / "notebooks" / f"{NAME}.ipynb").read_text())
    return "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")


def _search(out: Path, tmp_path: Path, *flags: str) -> dict:
    """Run step 4's script where freegpu cannot be imported (a learner's machine); return its report."""
    env = {**os.environ, "PYTHONPATH": _blocked(tmp_path, "freegpu"), "OMP_NUM_THREADS": "1",
           "MALLOC_MMAP_THRESHOLD_": "65536", "LD_PRELOAD": ""}
    done = subprocess.run([sys.executable, str(out / "find_batch_size.py"), "--num_rows", "4", "--d_model", "16",
                           "--num_layers", "1", *flags], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(next(line[7:] for line in done.stdout.splitlines() if line.startswith("REPORT ")))


def test_03_the_search_script_runs_uncapped_as_on_a_gpu(notebook_run, tmp_path):
    """The GPU branch passes --budget_mib 0: no cap, the first size fits (a CPU has room for it)."""
    report = _search(notebook_run[2], tmp_path, "--starting_batch_size", "8", "--budget_mib", "0")
    assert report["cap_bytes"] is None and report["batch_sizes_tried"] == [8] and report["errors"] == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS is enforced on Linux only")
def test_03_the_search_script_caps_itself_without_freegpu(notebook_run, tmp_path):
    """Its own cap (RLIMIT_AS from /proc/self/statm) gives the allocator error that Accelerate retries."""
    report = _search(notebook_run[2], tmp_path, "--starting_batch_size", "65536", "--budget_mib", "32")
    assert report["cap_bytes"] > 32 * MiB and report["errors"] and report["found_batch_size"] < 65536
    assert all("DefaultCPUAllocator: can't allocate memory" in error for error in report["errors"])
    assert "freegpu" not in (notebook_run[2] / "find_batch_size.py").read_text().split('"""', 2)[2]  # no import of it


def test_03_leaks_and_free_memory(notebook_run):
    _, results, _ = notebook_run
    p = results["parameters"]
    one_batch = results["memory_breakdown"]["activations_per_batch"][str(p["batch_size"])]
    assert results["leak_growth_bytes"] == pytest.approx((p["leak_steps"] - 1) * one_batch, rel=0.05)
    assert results["no_leak_growth_bytes"] == 0 and results["train_loop_leak_growth_bytes"] == 0
    per_step = results["leak_live_bytes_per_step"]
    assert all(len(v) == p["leak_steps"] for v in per_step.values())
    assert list(per_step.values())[2] == [0] * p["leak_steps"]  # backward freed what the graphs saved
    released = list(results["free_memory_alive_bytes"].values())
    mem = results["memory_breakdown"]
    assert released[0] == mem["weights"] + mem["grads"] + mem["optimizer_state"]
    assert released[1] == released[0]  # free_memory() alone: your variables still hold everything
    assert released[2] == released[3] == 0  # assigning its return value frees it


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


# freegpu.memory against oracles


@pytest.mark.notebook
def test_03_what_you_measured_shows_the_headline_only(notebook_run, course_out):
    record, results, _ = notebook_run
    outputs = [o for c in json.loads((course_out / record.executed).read_text())["cells"]
               if c["cell_type"] == "code" for o in c["outputs"]]
    measured = ["".join(o["data"]["text/markdown"]) for o in outputs if "text/markdown" in o.get("data", {})][-1]
    assert re.findall(r"^\| `(\w+)` \|", measured, re.M) == results["headline"]
    assert len(results["headline"]) < len(results) // 3  # far fewer rows than values recorded


def test_tensor_bytes_counts_a_storage_once():
    base = torch.zeros(10, 10)
    assert memory.tensor_bytes([base, base.t(), base[2:5]]) == 400
    assert memory.tensor_bytes([base, torch.zeros(3, dtype=torch.float16)]) == 406


def test_state_bytes_of_adamw():
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4)
    optimizer = torch.optim.AdamW(model.parameters())
    assert memory.state_bytes(model, optimizer) == {"weights": 144, "grads": 0, "optimizer_state": 0}
    model(torch.randn(2, 8)).sum().backward()
    optimizer.step()
    counted = memory.state_bytes(model, optimizer)
    assert counted["grads"] == 144 and 288 <= counted["optimizer_state"] <= 288 + 2 * 8  # + a step per tensor


def test_live_activations_follow_the_graph_without_a_garbage_collector():
    model = build_row_transformer(8, 4, 16, 1, 3)
    x, y = torch.randn(4, 32), torch.tensor([0, 1, 2, 0])
    gc.disable()  # the count must not depend on the collector: no reference cycles through the hooks
    try:
        with memory.LiveActivations() as live:
            loss = F.cross_entropy(model(x), y)
        kept = live.live_bytes()
        assert kept > 0
        del loss
        assert live.live_bytes() == 0
        with memory.LiveActivations() as live:
            loss = F.cross_entropy(model(x), y)
        loss.backward()  # backward frees what it used
        assert live.live_bytes() == 0
    finally:
        gc.enable()


def test_address_space_cap_support_by_platform():
    assert memory.address_space_cap_supported("linux")[0] is True
    supported, reason = memory.address_space_cap_supported("darwin")
    assert supported is False and "darwin" in reason


def test_cuda_peak_bytes_without_and_with_a_simulated_gpu(monkeypatch):
    calls = []
    assert memory.cuda_peak_bytes(lambda: calls.append("fn")) is None and calls == ["fn"]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: calls.append("sync"))
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda: calls.append("reset"))
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda: calls.append("read") or 1234)
    calls.clear()
    assert memory.cuda_peak_bytes(lambda: calls.append("fn")) == 1234
    assert calls == ["sync", "reset", "fn", "sync", "read"]  # the peak covers the call, after the GPU finished


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


def test_peak_bytes_follows_allocations_and_frees():
    base = torch.ones(10)
    with memory.PeakBytes() as peak:
        x = base * 2  # 40 bytes
        y = torch.zeros(1000)  # 4000 bytes, freed at once
        del y
        view = x.view(2, 5)  # a view allocates nothing
        x.add_(1)  # nor does an in-place op
        peak.phase("second")
        z = torch.zeros(500)  # 2000 bytes
    assert peak.peaks == {"forward": 4040, "second": 2040} and peak.live == 2040
    del x, view
    assert peak.live == 2000  # freed outside the block too: the count follows the tensors, not the block
    del z
    assert peak.live == 0


def test_peak_bytes_agrees_with_torch_mem_tracker():
    """The backward peak of a small transformer, against torch's own (private) MemTracker on the same step."""
    from torch.distributed._tools.mem_tracker import MemTracker

    torch.manual_seed(0)
    model = build_row_transformer(8, 4, 32, 2, 3)
    x, y = torch.randn(16, 32), torch.randint(0, 3, (16,))
    with memory.PeakBytes() as peak:
        loss = F.cross_entropy(model(x), y)
        peak.phase("backward")
        loss.backward()
    model.zero_grad(set_to_none=True)
    tracker = MemTracker()
    tracker.track_external(model)
    with tracker:
        F.cross_entropy(model(x), y).backward()
    theirs = next(iter(tracker.get_tracker_snapshot("peak").values()))
    params = 4 * sum(p.numel() for p in model.parameters())
    assert max(peak.peaks.values()) == pytest.approx(theirs["Total"] - params, rel=0.05)


class _Run:
    """What memlab's steps use of `results.Run`: `record`."""

    def __init__(self):
        self.values = {}

    def record(self, **values):
        self.values.update(values)


def test_memlab_batch_search_without_an_enforced_cap_records_why(monkeypatch, capsys):
    """On macOS or Windows (RLIMIT_AS not enforced) a CPU run of step 4 does not launch, and says why."""
    from freegpu import memlab

    monkeypatch.setattr(memlab, "address_space_cap_supported", lambda: (False, "darwin does not enforce RLIMIT_AS"))
    run = _Run()
    assert memlab.batch_search(run, "python find_batch_size.py", ".", "cpu", 48) is None
    assert run.values == {"batch_search_ran": False, "batch_search_reason": "darwin does not enforce RLIMIT_AS"}
    assert "step 4 did not run" in capsys.readouterr().out
