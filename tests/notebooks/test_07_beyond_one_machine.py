"""Notebook 07 (beyond one machine): its results contract, and its launch as a learner types it.

The tests read the session's run of 07. Where a scratch SLURM cluster can start here (root, slurm-wlm, munge:
tests/slurm_cluster.py), that run has the cluster's SLURM_CONF in its kernel's environment (tests/conftest.py), so
step 2's SLURM cells submit a real two-node job; elsewhere those cells say why they did not run, as they do in
`make course` (and in test_07_step2_slurm_says_it_did_not_run_without_a_controller, everywhere)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import psutil
import pytest
from conftest import NOTEBOOK_DIR, UNDER_SLURM

NAME = "07_beyond_one_machine"


def test_07_full_profile_runs_what_the_smoke_profile_runs():
    """07 reads no data: its profile is recorded and printed, and decides nothing else. So its full profile (a
    learner's GPU session) runs the same CPU processes as the smoke run every other test here reads, and
    test_full_profile does not run 07 a second time."""
    cells = nbformat.read(NOTEBOOK_DIR / f"{NAME}.ipynb", as_version=4).cells
    uses = [line.strip() for c in cells if c.cell_type == "code" and "parameters" not in c.metadata.get("tags", [])
            for line in c.source.splitlines() if re.search(r"\bprofile\b|resolved_profile|parameters\[", line)]
    assert uses == ["info, hw, resolved_profile, out = begin(NOTEBOOK, profile, output_dir)",
                    "run = start_run(NOTEBOOK, resolved_profile, info.name, hw.device_kind, out, "
                    "parameters=parameters)",
                    'print(f"profile {resolved_profile} (asked {profile!r}); platform {info.name}")'], uses


@pytest.mark.notebook
def test_07_step1_config_file_counts_all_machines(notebook_run):
    _, r, _ = notebook_run
    assert r["config_num_processes"] == 16 and r["config_per_machine"] == 8


@pytest.mark.notebook
def test_07_step2_two_machines_one_run(notebook_run):
    _, r, out = notebook_run
    p = r["parameters"]
    total = p["num_machines"] * p["processes_per_machine"]
    assert r["ranks"] == r["world_size"] == total == 4
    assert r["machine_ranks"] == list(range(p["num_machines"])) == [0, 1]
    assert r["distributed_type"] == "DistributedType.MULTI_CPU"
    assert r["losses_equal"] is True
    # two network namespaces where this machine allows them (root, iproute2: here and in CI), loopback otherwise
    can = os.geteuid() == 0 and shutil.which("ip") is not None
    assert r["launch_mode"] == ("namespaces" if can else "loopback")
    assert 0 < r["launch_s"] < p["launch_timeout_s"]
    reports = [json.loads(path.read_text()) for path in sorted((out / "ranks").glob("rank_*.json"))]
    assert [rep["process_index"] for rep in reports] == list(range(total))
    assert [rep["machine_rank"] for rep in reports] == [0, 0, 1, 1]  # static rendezvous: ranks in machine order
    assert len({rep["loss"] for rep in reports}) == 1


@pytest.mark.notebook
def test_07_step3_article_num_processes_is_the_total(notebook_run):
    _, r, _ = notebook_run
    assert r["processes_per_machine_ran"] == [2, 2]
    assert r["article_num_processes_is_total"] is True


@pytest.mark.notebook
def test_07_step4_wrong_port_times_out_at_the_rendezvous(notebook_run):
    _, r, _ = notebook_run
    assert r["wrong_port_failed"] is True
    assert "waiting for clients" in r["wrong_port_message"] and "1/2 clients joined" in r["wrong_port_message"]


@pytest.mark.notebook
def test_07_step1_fsdp2_config_file(notebook_run):
    _, r, _ = notebook_run
    assert r["fsdp_version"] == 2 and r["fsdp_state_dict"] == "SHARDED_STATE_DICT"
    assert r["deepspeed_zero_stage"] == 2 and r["deepspeed_processes"] == 2  # zero2.yaml, which step 4 launches


@pytest.mark.notebook
def test_07_step4_zero_shards_as_the_arithmetic_says(notebook_run):
    _, r, out = notebook_run
    weights, n = 32 * 256 + 256 * 32, 2  # fp32: 4 bytes of weight, 4 of gradient, 8 of AdamW state
    assert r["zero_bytes"] == {"DDP": [4 * weights, 4 * weights, 8 * weights],
                               "ZeRO-2": [4 * weights, 4 * weights // n, 8 * weights // n],
                               "ZeRO-3": [4 * weights // n, 4 * weights // n, 8 * weights // n]}
    assert r["zero_bytes_match"] is True and r["zero_losses_equal"] is True
    assert r["zero_types"] == ["DistributedType.MULTI_CPU", "DistributedType.DEEPSPEED", "DistributedType.DEEPSPEED"]
    assert "zero_launch_s" not in r  # cut: the seconds per launch (07's SLURM step took its lines)
    for tag, stage in (("ddp", 0), ("zero2", 2), ("zero3", 3)):  # every rank's own report, not only rank 0's
        reports = [json.loads((out / f"{tag}_{rank}.json").read_text()) for rank in range(n)]
        assert [rep["rank"] for rep in reports] == [0, 1] and {rep["stage"] for rep in reports} == {stage}
        assert len({(rep["params"], rep["grads"], rep["adam"], rep["loss"]) for rep in reports}) == 1


@pytest.mark.notebook
def test_07_step4_zero3_resumes_and_saves_one_model(notebook_run):
    _, r, out = notebook_run
    assert r["zero3_resumed_equal"] is True
    assert "pytorch_model" in r["zero3_state_files"] and "zero_to_fp32.py" in r["zero3_state_files"]
    assert r["zero3_model_weights"] == 32 * 256 + 256 * 32 and r["zero3_model_dtype"] == "torch.float32"
    assert (out / "zero3_model" / "model.safetensors").is_file()


@pytest.mark.notebook
def test_07_step5_article_snippet_fails_on_a_cpu_then_fixed(notebook_run):
    _, r, _ = notebook_run
    # Accelerate counted 1 process (no GPU backend found); DeepSpeed saw 2: 8 x 4 x 1 = 32 != 8 x 4 x 2
    assert r["snippet_failed"] is True
    assert "train_batch_size is not equal to" in r["snippet_error"] and "32 != 8 * 4 * 2" in r["snippet_error"]
    assert r["fixed_accumulation_steps"] == 4  # the plugin's, over the Accelerator's 1
    assert r["fixed_batches"] == 8
    assert r["fixed_steps_without_accumulate"] == 8 and r["fixed_steps_with_accumulate"] == 2


def _cell(starts: str) -> str:
    cells = nbformat.read(NOTEBOOK_DIR / f"{NAME}.ipynb", as_version=4).cells
    return next(cell.source for cell in cells if cell.cell_type == "code" and cell.source.startswith(starts))


@pytest.mark.notebook
def test_07_step2_namespaces_are_removed_after_the_run(notebook_run):
    _, r, _ = notebook_run
    if r["launch_mode"] != "namespaces":
        pytest.skip("the run used loopback")
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    assert not [line for line in listed.splitlines() if line.startswith(("fg0-", "fg1-"))], listed


@pytest.mark.notebook
def test_07_step2_without_root_two_launchers_share_loopback(notebook_run, monkeypatch):
    """The no-root branch, simulated: the notebook's own cells choose loopback, and its launch runs there."""
    _, _, out = notebook_run
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setenv("PATH", os.environ["PATH"])  # the cell prepends the venv; restored after
    monkeypatch.chdir(out)
    names = {"os": os, "sys": sys, "Path": Path, "num_machines": 2, "processes_per_machine": 2, "seed": 0}
    exec(_cell("import shutil"), names)
    assert (names["mode"], names["address"]) == ("loopback", "127.0.0.1")
    exec(_cell("from freegpu.launch import free_port"), names)
    commands = names["commands"]
    assert all("--main_process_ip 127.0.0.1" in c and "GLOO_SOCKET_IFNAME" not in c for c in commands.values())
    names["run_launches"]({name: c.replace(" ranks ", " ranks_loopback ").split() for name, c in commands.items()},
                          timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1"})
    ranks = names["read_reports"]("ranks_loopback", 4)
    assert [rank["machine_rank"] for rank in ranks] == [0, 0, 1, 1] and len({rank["loss"] for rank in ranks}) == 1


@pytest.mark.notebook
def test_07_step6_fsdp2_shards_saves_and_reloads(notebook_run):
    _, r, out = notebook_run
    weights = 4 * (32 * 256 + 256 * 32)  # fp32 bytes of the whole MLP
    # Accelerator(cpu=True) drops the FSDP plugin: DDP, a full copy on each rank; torch's fully_shard halves it
    assert r["fsdp2_plugin_type"] == "DistributedType.MULTI_CPU" and r["fsdp2_plugin_bytes"] == [weights] * 2
    assert r["fsdp2_bytes"] == [weights // 2] * 2
    assert r["fsdp2_sharded_files"] == [".metadata", "__0_0.distcp", "__1_0.distcp"]
    assert weights < r["fsdp2_full_bytes"] < weights + 4096  # the weights plus torch.save's container
    assert (out / "fsdp2_full.pt").stat().st_size == r["fsdp2_full_bytes"]
    assert r["fsdp2_reloaded_equal"] is True


@pytest.mark.notebook
def test_07_step2_slurm_runs_two_nodes_under_a_real_controller(notebook_run):
    if not UNDER_SLURM:
        pytest.skip("no scratch SLURM cluster here (needs root, slurm-wlm and munge): the run says it did not run")
    _, r, out = notebook_run
    assert r["slurm_ran"] is True
    assert r["slurm_machine_ranks"] == [0, 1] and r["slurm_losses_equal"] is True
    assert 0 < r["slurm_s"] < r["parameters"]["launch_timeout_s"]
    reports = [json.loads(path.read_text()) for path in sorted((out / "slurm").glob("rank_*.json"))]
    ranks = [(rep["machine_rank"], rep["process_index"], rep["world_size"]) for rep in reports]
    assert ranks == [(0, 0, 2), (1, 1, 2)]  # one process on each node


def _slurm_cells(tmp_path, monkeypatch) -> dict:
    recorded = {}
    monkeypatch.delenv("SLURM_CONF", raising=False)  # as in `make course` (a missing file makes sinfo wait 60 s)
    monkeypatch.chdir(tmp_path)
    names = {"os": os, "shutil": shutil, "subprocess": subprocess, "time": __import__("time"), "seed": 0,
             "launch_timeout_s": 60.0, "run": type("Run", (), {"record": lambda self, **kw: recorded.update(kw)})()}
    exec(_cell("has_sbatch"), names)
    exec(_cell("if slurm_ran:"), names)
    return recorded


def test_07_step2_slurm_says_it_did_not_run_without_a_controller(tmp_path, monkeypatch, capsys):
    """As in `make course`: no SLURM_CONF and no controller, so sinfo fails and nothing is submitted."""
    if Path("/etc/slurm/slurm.conf").exists():
        pytest.skip("this machine has a SLURM configuration of its own")
    recorded = _slurm_cells(tmp_path, monkeypatch)
    assert recorded == {"slurm_ran": False}  # and no slurm_machine_ranks, slurm_losses_equal or slurm_s
    said = capsys.readouterr().out
    assert said.startswith("Not run here: ") and ("not installed" in said) == bool(shutil.which("sbatch") is None)


@pytest.mark.notebook
def test_07_step2_notebook_launcher_ran_num_processes_on_each_machine(notebook_run):
    """The run: two `python nl.py R PORT`, each calling notebook_launcher(num_processes=2, num_nodes=2), made a world
    of 4, two processes on each machine rank."""
    _, r, out = notebook_run
    assert r["notebook_launcher_world_size"] == 4
    reports = [json.loads(path.read_text()) for path in sorted((out / "nl").glob("rank_*.json"))]
    ranks = [(rep["machine_rank"], rep["process_index"], rep["world_size"]) for rep in reports]
    assert ranks == [(0, 0, 4), (0, 1, 4), (1, 2, 4), (1, 3, 4)]


def test_07_step2_notebook_launcher_counts_per_machine_accelerate_launch_the_total():
    """Step 2's contrast, read from Accelerate's source: notebook_launcher gives torch `num_processes` per node and
    a world of num_nodes x num_processes; `accelerate launch` divides `--num_processes` by `--num_machines`."""
    import inspect

    from accelerate import launchers
    from accelerate.utils import launch

    source = inspect.getsource(launchers.notebook_launcher)
    assert "nproc_per_node=num_processes" in source and "world_size=num_nodes * num_processes" in source
    assert "args.nproc_per_node = str(num_processes // num_machines)" in inspect.getsource(launch)


@pytest.mark.notebook
def test_07_step3_a_failed_launch_leaves_no_process_behind(notebook_run, monkeypatch):
    """The wrong-port cell, run here: once its LaunchError is out, no process of either launcher is left."""
    _, _, out = notebook_run
    monkeypatch.setattr(os, "geteuid", lambda: 1000)  # loopback: no namespaces to make for this check
    monkeypatch.setenv("PATH", os.environ["PATH"])
    monkeypatch.chdir(out)
    recorded = {}
    names = {"os": os, "sys": sys, "Path": Path, "num_machines": 2, "processes_per_machine": 2, "seed": 0,
             "launch_timeout_s": 120.0, "run": type("Run", (), {"record": lambda self, **kw: recorded.update(kw)})()}
    exec(_cell("import shutil"), names)
    exec(_cell("from freegpu.launch import free_port"), names)
    exec(_cell("from freegpu.launch import LaunchError"), names)
    assert recorded["wrong_port_failed"] is True
    ports = {f"--main_process_port {names['port'] + r}" for r in range(2)}
    left = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        command = " ".join(proc.info["cmdline"] or [])
        if any(port in command for port in ports):
            left.append((proc.info["pid"], command))
    assert not left, left
    assert not psutil.Process().children(recursive=True)
