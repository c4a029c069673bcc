"""Notebook 07 (beyond one machine): its results contract, and its launch as a learner types it."""

from __future__ import annotations

import json

import pytest

NAME = "07_beyond_one_machine"


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
    assert r["losses_equal"] is True and r["launch_mode"] == "loopback"
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
