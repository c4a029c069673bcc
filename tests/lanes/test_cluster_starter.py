"""The cluster starter (starters/cluster/): Accelerate on several machines, and a real SLURM run.

- The three configs load with Accelerate's own loader (`load_config_from_file`), as `accelerate launch` reads them.
- `train.py --cpu` runs under `accelerate launch` on 2 CPU processes (gloo): 2 ranks, equal losses.
- `train.sbatch` passes `bash -n`; SLURM's own parser takes it (`sbatch --test-only`).
- A real SLURM cluster in a scratch folder (tests/slurm_cluster.py: munged with its own key and socket, slurmctld
  and two slurmd nodes on localhost). `sbatch train.sbatch` runs one launcher per node: rank 0 on node1, rank 1 on
  node2, equal losses. Every daemon is stopped by its pid, even on failure. Without slurm-wlm and munge
  (`apt-get install -y slurm-wlm munge`, which .ci/run does) the SLURM tests skip and say so.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from conftest import ROOT
from slurm_cluster import BIN, ENV, free_port, needs_root, needs_slurm  # the `slurm` fixture: tests/conftest.py

CLUSTER = ROOT / "starters" / "cluster"


def ranks(report: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(report.parent.glob(report.name + ".rank*"))]


@pytest.mark.parametrize("name", ["multi_node", "fsdp2", "deepspeed_zero3"])
def test_config_loads_with_accelerates_loader(name):
    from accelerate.commands.config.config_args import load_config_from_file

    config = load_config_from_file(str(CLUSTER / f"{name}.yaml"))
    expected = {"multi_node": "MULTI_GPU", "fsdp2": "FSDP", "deepspeed_zero3": "DEEPSPEED"}[name]
    assert str(config.distributed_type).endswith(expected)
    if name == "multi_node":
        assert (config.num_machines, config.num_processes, config.rdzv_backend) == (2, 2, "static")
    if name == "fsdp2":
        assert config.fsdp_config["fsdp_version"] == 2
    if name == "deepspeed_zero3":
        assert config.deepspeed_config["zero_stage"] == 3


def test_train_py_two_cpu_processes(tmp_path):
    report = tmp_path / "r.json"
    cmd = [str(BIN / "accelerate"), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
           "--main_process_port", str(free_port()), str(CLUSTER / "train.py"), "--cpu", str(report)]
    out = subprocess.run(cmd, env=ENV, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = ranks(report)
    assert [r["rank"] for r in rows] == [0, 1] and {r["world"] for r in rows} == {2}
    assert {r["distributed_type"] for r in rows} == {"DistributedType.MULTI_CPU"}
    assert rows[0]["losses"] == rows[1]["losses"]


def test_allreduce_check_two_cpu_processes(tmp_path):
    cmd = [str(BIN / "torchrun"), "--nproc_per_node", "2", "--master_port", str(free_port()),
           str(CLUSTER / "allreduce_check.py")]
    out = subprocess.run(cmd, env=ENV, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "rank 0/2: all_reduce 2" in out.stdout and "rank 1/2: all_reduce 2" in out.stdout


def test_sbatch_script_parses_in_bash():
    subprocess.run(["bash", "-n", str(CLUSTER / "train.sbatch")], check=True)


@needs_slurm
@needs_root
def test_sbatch_test_only(slurm):
    env, _ = slurm
    out = subprocess.run(["sbatch", "--test-only", str(CLUSTER / "train.sbatch")], env=env,
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and "to start at" in out.stderr, out.stderr


@needs_slurm
@needs_root
def test_real_slurm_two_nodes(slurm, tmp_path):
    env, d = slurm
    report = tmp_path / "slurm.json"
    shutil.copy(CLUSTER / "train.py", tmp_path)
    job_env = {**env, "MAIN_IP": "127.0.0.1", "MAIN_PORT": str(free_port()), "TRAIN_ARGS": f"--cpu {report}"}
    start = time.perf_counter()
    out = subprocess.run(["sbatch", "--parsable", f"--chdir={tmp_path}", f"--output={tmp_path}/job.out",
                          str(CLUSTER / "train.sbatch")], env=job_env, capture_output=True, text=True,
                         timeout=30, check=True)
    job = out.stdout.strip().split(";")[0]
    # `sbatch --wait` would do, but it polls ever more slowly (a 10 s job returned after 42 s)
    for _ in range(240):
        state = subprocess.run(["scontrol", "-o", "show", "job", job], env=env, capture_output=True,
                               text=True).stdout
        if not any(f"JobState={busy}" in state for busy in ("PENDING", "RUNNING", "COMPLETING")):
            break  # COMPLETING: the steps ended, SLURM still cleans up; COMPLETED comes next
        time.sleep(0.5)
    job_out = (tmp_path / "job.out").read_text() if (tmp_path / "job.out").exists() else ""
    if "JobState=" in state:  # MinJobAge=4: on a busy machine the record can be gone before this poll reads it;
        assert "JobState=COMPLETED" in state and "ExitCode=0:0" in state, state + job_out[-3000:]
    # then the two ranks' reports below are the evidence
    rows = ranks(report)
    assert [r["rank"] for r in rows] == [0, 1] and {r["world"] for r in rows} == {2}, job_out[-3000:]
    assert [r["local_rank"] for r in rows] == [0, 0]  # one process per node
    assert {r["distributed_type"] for r in rows} == {"DistributedType.MULTI_CPU"}
    assert rows[0]["losses"] == rows[1]["losses"]
    print(f"sbatch to completed: {time.perf_counter() - start:.1f} s")
