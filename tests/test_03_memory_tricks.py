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

from freegpu import memory, sharding
from freegpu.measure import interleaved_timings
from freegpu.models import build_row_transformer
from freegpu.results import COMMON_KEYS

NAME = "03_memory_tricks"
MiB = 2**20


@pytest.fixture(scope="module")
def run03(executed, course_out):
    record, results = executed(NAME)
    return record, results, course_out / "results" / NAME


ASSERTED = {
    "num_parameters", "cuda_peak_step_bytes", "memory_breakdown", "activations_by_seq_len",
    "activation_growth_batch_x2", "activation_growth_seq_x2", "bert_base_parameters", "bert_base_fixed_bytes",
    "t4_bytes_left_for_activations", "accumulation_max_abs_grad_diff", "accumulation_relative_grad_diff",
    "accumulation_max_abs_weight_diff", "accumulation_relative_weight_diff", "accumulation_largest_step_change",
    "accumulation_micro_batch_activation_bytes", "activation_bytes_by_accumulation_steps",
    "accumulate_micro_batches_per_step", "accumulate_sync_pattern_epoch1", "scheduler_steps", "batches_seen",
    "hand_rolled_micro_batches_per_step", "hand_rolled_never_applied", "last_group_micro_batches",
    "last_group_gradient_scale", "checkpointing_activation_bytes", "checkpointing_activation_bytes_ratio",
    "checkpointing_same_loss", "checkpointing_max_abs_grad_diff", "checkpointing_step_times_s",
    "checkpointing_step_time_ratio", "checkpointing_step_time_resolved", "timing_clock",
    "checkpointing_cuda_peak_bytes", "found_batch_size",
    "batch_sizes_tried", "budget_bytes", "cap_bytes", "oom_errors", "oom_error_first", "search_follows_x09",
    "second_call_tried", "search_device", "retry_predicate", "batch_search_ran", "batch_search_reason",
    "leak_growth_bytes", "no_leak_growth_bytes", "train_loop_leak_growth_bytes", "leak_live_bytes_per_step",
    "free_memory_alive_bytes", "zero_table", "zero_per_gpu_bytes", "deepspeed_ran", "deepspeed_reason",
    "deepspeed_config_stage", "checkpointing_peak_bytes", "checkpointing_backward_peak_ratio", "zero_max_parameters",
    "zero_fsdp2_launch", "zero_fsdp2_launch_s", "zero_fsdp2_setups", "zero_fsdp2_world_size", "zero_fsdp2_backend",
    "zero_fsdp2_num_parameters", "zero_fsdp2_share_of_ddp", "zero_fsdp2_max_abs_loss_diff",
    "accelerate_fsdp_plugin_run", "accelerate_fsdp_plugin_sharded", "accelerate_fsdp_plugin_output_lines",
}


def test_03_every_recorded_value_is_asserted(run03):
    _, results, _ = run03
    assert set(results) - set(COMMON_KEYS) == ASSERTED


def test_03_where_the_memory_goes(run03):
    _, results, _ = run03
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
    # bert-base arithmetic: 16 bytes per parameter before any activation, the rest of a T4 left over.
    bert = results["bert_base_parameters"]
    assert bert == memory.bert_parameters() == 109_482_240
    assert results["bert_base_fixed_bytes"] == {"weights": 4 * bert, "grads": 4 * bert, "optimizer_state": 8 * bert}
    assert results["t4_bytes_left_for_activations"] == 15360 * MiB - 16 * bert


def test_03_accumulation_equals_the_big_batch(run03):
    _, results, _ = run03
    k = results["parameters"]["gradient_accumulation_steps"]
    assert results["accumulation_relative_grad_diff"] <= 1e-5
    assert results["accumulation_relative_weight_diff"] <= 1e-5
    assert 0 <= results["accumulation_max_abs_grad_diff"] < 1e-5
    assert 0 <= results["accumulation_max_abs_weight_diff"] < 1e-7
    # One step with the complete gradient: stepping per micro-batch would differ by about the step itself.
    assert results["accumulation_max_abs_weight_diff"] < 1e-3 * results["accumulation_largest_step_change"]
    per_k = {int(kk): v for kk, v in results["activation_bytes_by_accumulation_steps"].items()}
    assert per_k[k] == results["accumulation_micro_batch_activation_bytes"]
    assert per_k[1] > per_k[2] > per_k[k]  # a smaller k (same effective batch) needs more memory
    assert 0.95 * k < per_k[1] / per_k[k] < 1.05 * k


def test_03_accumulate_syncs_at_epoch_end_and_the_hand_rolled_loop_does_not(run03):
    _, results, _ = run03
    k = results["parameters"]["gradient_accumulation_steps"]
    num_micro = 2 * k + k // 2
    epoch = [k, k, num_micro % k]
    assert results["accumulate_micro_batches_per_step"] == epoch * 2
    pattern = results["accumulate_sync_pattern_epoch1"]
    assert len(pattern) == num_micro and [i + 1 for i, s in enumerate(pattern) if s] == [k, 2 * k, num_micro]
    assert results["batches_seen"] == 2 * num_micro
    assert results["scheduler_steps"] == len(results["accumulate_micro_batches_per_step"]) < results["batches_seen"]
    hand = results["hand_rolled_micro_batches_per_step"]
    assert hand == [k, k, k + num_micro % k, k] and max(hand) > k
    assert results["hand_rolled_never_applied"] == num_micro % k
    assert sum(hand) + results["hand_rolled_never_applied"] == results["batches_seen"]
    # The last, uneven group still divides by k.
    assert results["last_group_micro_batches"] == num_micro % k
    assert results["last_group_gradient_scale"] == pytest.approx((num_micro % k) / k, rel=1e-4)


def test_03_checkpointing(run03):
    _, results, _ = run03
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
    assert results["checkpointing_step_time_resolved"] == (min(times["checkpointed"]) > max(times["plain"]))
    assert ("checkpointing_step_time_ratio" in results["headline"]) == results["checkpointing_step_time_resolved"]
    assert results["checkpointing_cuda_peak_bytes"] == {"plain": None, "checkpointed": None}


def test_03_checkpointing_judged_by_the_backward_peak(run03):
    """Issue 17: what the forward keeps is not what decides an out-of-memory error; the peak during backward is."""
    _, results, _ = run03
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


def test_03_find_executable_batch_size_under_a_real_cap(run03):
    _, results, out = run03
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


def _search(out: Path, tmp_path: Path, *flags: str) -> dict:
    """Run step 4's script where freegpu cannot be imported (a learner's machine); return its report."""
    env = {**os.environ, "PYTHONPATH": _blocked(tmp_path, "freegpu"), "OMP_NUM_THREADS": "1",
           "MALLOC_MMAP_THRESHOLD_": "65536", "LD_PRELOAD": ""}
    done = subprocess.run([sys.executable, str(out / "find_batch_size.py"), "--num_rows", "4", "--d_model", "16",
                           "--num_layers", "1", *flags], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(next(line[7:] for line in done.stdout.splitlines() if line.startswith("REPORT ")))


def test_03_the_search_script_runs_uncapped_as_on_a_gpu(run03, tmp_path):
    """The GPU branch passes --budget_mib 0: no cap, the first size fits (a CPU has room for it)."""
    report = _search(run03[2], tmp_path, "--starting_batch_size", "8", "--budget_mib", "0")
    assert report["cap_bytes"] is None and report["batch_sizes_tried"] == [8] and report["errors"] == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS is enforced on Linux only")
def test_03_the_search_script_caps_itself_without_freegpu(run03, tmp_path):
    """Its own cap (RLIMIT_AS from /proc/self/statm) gives the allocator error that Accelerate retries."""
    report = _search(run03[2], tmp_path, "--starting_batch_size", "65536", "--budget_mib", "32")
    assert report["cap_bytes"] > 32 * MiB and report["errors"] and report["found_batch_size"] < 65536
    assert all("DefaultCPUAllocator: can't allocate memory" in error for error in report["errors"])
    assert "freegpu" not in (run03[2] / "find_batch_size.py").read_text().split('"""', 2)[2]  # no import of it


def test_03_leaks_and_free_memory(run03):
    _, results, _ = run03
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


def test_03_zero_and_deepspeed(run03):
    _, results, _ = run03
    bert = results["bert_base_parameters"]
    assert results["zero_per_gpu_bytes"] == memory.zero_per_gpu_bytes(bert, 2)
    table = results["zero_table"]
    assert list(table) == ["stage 0", "stage 1", "stage 2", "stage 3"]
    gib = [row["per_gpu_gib"] for row in table.values()]
    assert gib == sorted(gib, reverse=True) and gib[0] == pytest.approx(16 * bert / 1024**3, abs=1e-3)
    assert all(0 < row["t4_share"] < 1 for row in table.values())
    assert results["deepspeed_ran"] is False and "CUDA" in results["deepspeed_reason"]
    assert results["deepspeed_config_stage"] == 2
    # The table's conclusion: the most parameters whose model states fit a T4, stage by stage.
    fits = results["zero_max_parameters"]
    assert fits == memory.zero_max_parameters(15360 * MiB, 2)
    assert [row["max_parameters"] for row in table.values()] == list(fits.values())
    assert fits["stage 0"] < fits["stage 1"] < fits["stage 2"] < fits["stage 3"]
    assert fits["stage 3"] == pytest.approx(2 * fits["stage 0"], rel=1e-6)  # two GPUs: twice the model
    assert fits["stage 0"] == 15360 * MiB // 16 > 5 * bert  # 16 bytes a parameter; bert-base fits one T4


def test_03_zero_run_for_real_on_two_processes(run03):
    """Issue 18: DDP against FSDP2 on two CPU processes, bytes counted from the tensors each rank keeps."""
    _, results, out = run03
    p = results["parameters"]
    world = results["zero_fsdp2_world_size"]
    assert world == 2 and results["zero_fsdp2_backend"] == "gloo"
    assert results["zero_fsdp2_launch"].startswith("torchrun --standalone --nproc_per_node 2 zero_fsdp2.py ")
    assert f"--steps {p['zero_steps']}" in results["zero_fsdp2_launch"]
    assert results["zero_fsdp2_num_parameters"] == results["num_parameters"]  # the notebook's transformer
    rows = results["zero_fsdp2_setups"]
    assert list(rows) == ["ddp", "fsdp2_reshard", "fsdp2_no_reshard"]
    full = 4 * results["num_parameters"]  # fp32 weights
    ddp = rows["ddp"]
    assert ddp["sharded"] is False
    assert ddp["weights_bytes_per_rank"] == ddp["grads_bytes_per_rank"] == [full] * world  # every rank holds all
    assert all(2 * full <= b < 2.01 * full for b in ddp["optimizer_state_bytes_per_rank"])  # AdamW: two moments
    for name in ("fsdp2_reshard", "fsdp2_no_reshard"):
        row = rows[name]
        assert row["sharded"] is True
        for kind in sharding.KINDS:  # each rank about 1/world of DDP's (padding, AdamW's unsharded step counters)
            assert 1 / world <= row[f"{kind}_share_of_ddp"] < 1 / world + 0.02, (name, kind)
            assert all(b < 0.52 * d for b, d in zip(row[f"{kind}_bytes_per_rank"], ddp[f"{kind}_bytes_per_rank"],
                                                     strict=True))
        assert 0 <= row["max_abs_loss_diff_to_ddp"] <= 1e-5  # the same training, within float32 round-off
        assert row["step_time_s"]["n"] == p["zero_steps"] - 1 and row["step_time_s"]["min"] > 0
        assert results["zero_fsdp2_share_of_ddp"][name] == {k: round(row[f"{k}_share_of_ddp"], 4)
                                                             for k in sharding.KINDS}
    # Between forward and backward: True frees the gathered weights (ZeRO-3), False keeps them whole (ZeRO-2).
    assert rows["fsdp2_reshard"]["weights_between_forward_and_backward_share_of_ddp"] < 0.52
    assert rows["fsdp2_no_reshard"]["weights_between_forward_and_backward_share_of_ddp"] == 1.0
    assert results["zero_fsdp2_max_abs_loss_diff"] == max(r["max_abs_loss_diff_to_ddp"] for r in rows.values())
    assert results["zero_fsdp2_launch_s"] > 0 and "ddp" not in results["zero_fsdp2_share_of_ddp"]
    assert (out / "zero_fsdp2.py").is_file() and len(list((out / "zero_reports").glob("rank_*.json"))) == world


def test_03_accelerate_fsdp_plugin_on_cpu_shards_nothing(run03):
    """The trap: Accelerate 1.16 with fsdp_plugin and cpu=True runs plain DDP (MULTI_CPU), silently."""
    _, results, _ = run03
    trap, ddp = results["accelerate_fsdp_plugin_run"], results["zero_fsdp2_setups"]["ddp"]
    assert trap["distributed_type"] == ["DistributedType.MULTI_CPU"] * 2
    assert trap["prepared_as"] == ["DistributedDataParallel"] * 2
    for kind in sharding.KINDS:
        assert trap[f"{kind}_bytes_per_rank"] == ddp[f"{kind}_bytes_per_rank"]  # each rank holds everything
    assert trap["sharded"] is False and results["accelerate_fsdp_plugin_sharded"] is False
    assert results["accelerate_fsdp_plugin_output_lines"] == []  # and nothing said about it


def _blocked(tmp_path: Path, *modules: str) -> str:
    """A folder that, first on PYTHONPATH, makes `modules` fail to import: a machine without them."""
    for module in modules:
        (tmp_path / "blocked" / module).mkdir(parents=True)
        (tmp_path / "blocked" / module / "__init__.py").write_text(f"raise ImportError('{module} is not here')\n")
    return str(tmp_path / "blocked")


def test_03_zero_script_runs_with_only_torch(run03, tmp_path):
    """Issue 17: the script a learner copies runs where neither freegpu nor accelerate can be imported."""
    _, _, out = run03
    reports = tmp_path / "reports"
    reports.mkdir()
    env = {**os.environ, "PYTHONPATH": _blocked(tmp_path, "freegpu", "accelerate"), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           str(out / "zero_fsdp2.py"), "--report_dir", str(reports), "--steps", "2", "--batch_size", "2",
           "--num_rows", "4", "--row_features", "4", "--d_model", "16", "--num_layers", "1"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = [json.loads(path.read_text()) for path in sorted(reports.glob("rank_*.json"))]
    assert [r["rank"] for r in ranks] == [0, 1] and "accelerate_plugin" not in ranks[0]
    rows = sharding.summarize(ranks)
    assert rows["fsdp2_reshard"]["weights_share_of_ddp"] < 0.6 and rows["fsdp2_reshard"]["sharded"] is True


def _notebook_markdown() -> str:
    nb = json.loads((Path(__file__).parents[1] / "notebooks" / f"{NAME}.ipynb").read_text())
    return "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")


def test_03_t4x2_fsdp2_config_is_what_accelerate_launch_reads(tmp_path, monkeypatch):
    """The config file the notebook shows for Kaggle T4 x2: every key known to `accelerate launch`, and the plugin
    it yields is FSDP2, resharding after forward, wrapping BertLayer."""
    import yaml
    from accelerate import FullyShardedDataParallelPlugin
    from accelerate.commands.config.config_args import load_config_from_file
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils import DistributedType
    from accelerate.utils.launch import prepare_multi_gpu_env

    text = re.search(r"```yaml\n(.*?)```", _notebook_markdown(), re.S).group(1)
    assert "accelerate launch --config_file fsdp2_t4x2.yaml train.py" in _notebook_markdown()
    config_file = tmp_path / "fsdp2_t4x2.yaml"
    config_file.write_text(text)
    config = load_config_from_file(str(config_file))  # unknown top-level keys raise here
    assert config.distributed_type == DistributedType.FSDP and config.num_processes == 2
    args = launch_command_parser().parse_args(["--config_file", str(config_file), "train.py"])
    assert set(yaml.safe_load(text)["fsdp_config"]) <= set(vars(args))  # a misspelled key would be ignored
    args, _, _ = _validate_launch_command(args)
    env = prepare_multi_gpu_env(args)
    assert env["ACCELERATE_USE_FSDP"] == "true" and env["FSDP_VERSION"] == "2"
    for key in [k for k in os.environ if k.startswith("FSDP_")]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        if key.startswith(("FSDP_", "ACCELERATE_USE_FSDP")):
            monkeypatch.setenv(key, value)
    plugin = FullyShardedDataParallelPlugin()  # as Accelerator() builds it in each launched process
    assert plugin.fsdp_version == 2 and plugin.reshard_after_forward is True
    assert plugin.transformer_cls_names_to_wrap == ["BertLayer"]


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
def test_03_what_you_measured_shows_the_headline_only(run03, course_out):
    record, results, _ = run03
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


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="transformers is not installed")
def test_bert_parameters_match_transformers():
    from transformers import BertConfig, BertModel

    with torch.device("meta"):  # no memory, no download
        base = BertModel(BertConfig())
        tiny = BertModel(BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                    intermediate_size=37, max_position_embeddings=64))
    assert memory.bert_parameters() == sum(p.numel() for p in base.parameters())
    assert memory.bert_parameters(99, 32, 2, 37, 64) == sum(p.numel() for p in tiny.parameters())


def test_zero_per_gpu_bytes_follows_the_zero_paper():
    per_gpu = memory.zero_per_gpu_bytes(1000, 4)
    assert per_gpu == {"stage 0": 16000, "stage 1": 4000 + 3000, "stage 2": 2000 + 3500, "stage 3": 4000}


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


def _report(rank: int, weights: dict[str, int], losses: dict[str, list[float]], times: dict[str, list[float]]):
    return {"rank": rank, "setups": {name: {"weights": w, "grads": w, "optimizer_state": 2 * w, "sharded": w < 100,
                                            "weights_between_forward_and_backward": w, "losses": losses[name],
                                            "step_times_s": times[name]} for name, w in weights.items()}}


def test_sharding_summarize_against_hand_counts():
    losses = {"ddp": [2.0, 1.5], "fsdp": [2.0, 1.5 + 1e-7]}
    reports = [_report(0, {"ddp": 100, "fsdp": 50}, losses, {"ddp": [9.0, 1.0, 3.0], "fsdp": [9.0, 2.0, 4.0]}),
               _report(1, {"ddp": 100, "fsdp": 52}, losses, {"ddp": [9.0, 2.0, 1.0], "fsdp": [9.0, 6.0, 4.0]})]
    rows = sharding.summarize(reports, warmup=1)
    fsdp = rows["fsdp"]
    assert fsdp["weights_bytes_per_rank"] == [50, 52] and fsdp["weights_share_of_ddp"] == 0.52  # the larger rank
    assert fsdp["optimizer_state_share_of_ddp"] == 0.52 and fsdp["sharded"] is True and rows["ddp"]["sharded"] is False
    assert fsdp["max_abs_loss_diff_to_ddp"] == pytest.approx(1e-7)
    # A step lasts as long as its slowest rank; the warm-up step is dropped.
    assert rows["ddp"]["step_time_s"] == {"median": 2.5, "min": 2.0, "max": 3.0, "n": 2}
    assert fsdp["step_time_s"]["median"] == 5.0 and fsdp["step_time_over_ddp"] == 2.0


def test_sharding_plugin_run_sees_a_shard_on_any_rank():
    reports = [{**_report(r, {"ddp": 100}, {"ddp": [1.0]}, {"ddp": [1.0]}),
                "accelerate_plugin": {"distributed_type": "DistributedType.MULTI_CPU", "prepared_as": "DDP",
                                      "weights": 100, "grads": 100, "optimizer_state": 200, "sharded": False}}
               for r in (0, 1)]
    assert sharding.plugin_run(reports)["sharded"] is False
    reports[1]["accelerate_plugin"]["grads"] = 50
    assert sharding.plugin_run(reports)["sharded"] is True


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


def test_memlab_zero_table_concludes_from_the_numbers(capsys):
    from freegpu import memlab

    run = _Run()
    memlab.zero_table(run, 2 * 10**9, 15360 * MiB, num_gpus=2, name="a 2 B model")  # 32 GB of states
    assert "a 2 B model does not fit one card without ZeRO" in capsys.readouterr().out
    assert run.values["zero_per_gpu_bytes"] == memory.zero_per_gpu_bytes(2 * 10**9, 2)
    memlab.zero_table(run, 10**9, 15360 * MiB, num_gpus=2, name="a 1 B model")  # 99% of a T4
    assert "a 1 B model fits one card without ZeRO, with little left" in capsys.readouterr().out
    memlab.zero_table(run, memory.bert_parameters(), 15360 * MiB, num_gpus=2, name="bert-base")
    assert "bert-base needs no ZeRO" in capsys.readouterr().out
