"""Every notebook runs headless with papermill (smoke profile, offline) and records what it measured."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import subprocess
import sys

import nbformat
import papermill
import pytest
from accelerate.commands.config.config_args import load_config_from_file
from conftest import NOTEBOOK_DIR, NOTEBOOK_NAMES, PLANTED_SECRETS

pytestmark = pytest.mark.notebook

# Wall-time budgets are benchmarks (build/run_course.py BUDGET_S, recorded in summary.json beside each
# measured wall time), not timed tests: a loaded machine must not fail a correct notebook. Only a runaway
# (ten minutes) fails here.
RUNAWAY_S = 600


@pytest.mark.parametrize("name", NOTEBOOK_NAMES)
def test_common_results(name, executed, course_out):
    record, results = executed(name)
    assert results["notebook"] == name
    assert results["profile"] == "smoke"
    assert results["platform"] == "headless"  # papermill, no Jupyter server
    assert results["versions"]["torch"] and results["versions"]["accelerate"]
    assert 0 < results["wall_s"] <= record.wall_s
    assert record.peak_rss_mb > 50  # the kernel's memory was really sampled
    assert record.wall_s < RUNAWAY_S, f"{name} took {record.wall_s} s"


@functools.cache
def _named_in_tests() -> frozenset[str]:
    """Every string constant and keyword name in the test files (parsed once): a recorded key a test reads is
    among them."""
    import ast

    named = set()
    for path in NOTEBOOK_DIR.parent.joinpath("tests").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                named.add(node.value)
            elif isinstance(node, ast.keyword) and node.arg:
                named.add(node.arg)
    return frozenset(named)


@pytest.mark.parametrize("name", NOTEBOOK_NAMES)
def test_every_recorded_key_is_read_by_a_test(name, executed):
    """Each key a notebook records (beyond the contract's common keys, checked above) is named in a test, where
    its value is asserted; a key nothing reads fails here, naming it. 03 also checks each key is asserted."""
    from freegpu.results import COMMON_KEYS

    _, results = executed(name)
    named = _named_in_tests()
    unread = sorted(key for key in results if key not in COMMON_KEYS and key not in named)
    assert not unread, f"{name} records keys no test reads: {unread}"


@pytest.mark.parametrize("name", NOTEBOOK_NAMES)
def test_no_secret_leaks(name, executed, course_out):
    record, _ = executed(name)
    texts = [(course_out / "executed" / f"{name}.ipynb").read_text(), (course_out / record.results).read_text()]
    for key, value in PLANTED_SECRETS.items():
        assert all(value not in text for text in texts), f"{key}'s value leaked from {name}"


@pytest.mark.parametrize("name", NOTEBOOK_NAMES)
def test_bad_parameter_fails_at_the_parameters(name, tmp_path):
    with pytest.raises(papermill.PapermillExecutionError) as info:
        papermill.execute_notebook(str(NOTEBOOK_DIR / f"{name}.ipynb"), str(tmp_path / "out.ipynb"),
                                   parameters={"profile": "fastest", "output_dir": str(tmp_path)},
                                   kernel_name="python3", cwd=str(tmp_path), progress_bar=False)
    error = info.value
    assert error.ename == "ValueError"
    assert "'fastest'" in error.evalue and "'auto', 'smoke', 'full'" in error.evalue
    # The failing cell is the first one after the (injected) parameters: nothing ran before the check.
    cells = [c for c in json.loads((tmp_path / "out.ipynb").read_text())["cells"] if c["cell_type"] == "code"]
    injected = next(i for i, c in enumerate(cells) if "injected-parameters" in c["metadata"].get("tags", []))
    failed = next(i for i, c in enumerate(cells) if any(o.get("output_type") == "error" for o in c["outputs"]))
    assert failed == injected + 1
    assert not (tmp_path / "results.json").exists()


def test_00_step_1_begin_finds_the_platform(executed, course_out):
    _, results = executed("00_environment_check")
    # headless: the signal is the kernel's parent process, or the Jupyter variable it lacks; a name, not a sentence
    evidence = results["platform_evidence"]
    assert evidence.startswith("parent=") or evidence == "JPY_SESSION_NAME=None", evidence
    assert results["kaggle_batch"] is False
    assert results["working_persists"] is True  # a local disk keeps its outputs
    assert results["parameters"]["profile"] == "smoke" and results["parameters"]["check_internet"] is True
    outputs, printed = _printed(course_out, "00_environment_check")
    assert not any(o["output_type"] == "execute_result" for o in outputs)  # no stray values under cells
    assert f"evidence: {results['platform_evidence']}" in printed


def test_00_step_2_hardware_and_profile(executed, course_out):
    _, results = executed("00_environment_check")
    assert results["device"] == "cpu" and results["gpus"] == [] and results["tpu"] is None
    import torch

    assert results["cuda_runtime"] == torch.version.cuda  # the CUDA torch was built for: None for the CPU build
    assert results["logical_cpus"] >= 1 and results["physical_cpus"] >= 1 and results["ram_total_gib"] > 0
    _, printed = _printed(course_out, "00_environment_check")
    assert "profile: smoke  (asked 'smoke';" in printed  # what begin found, shown


def test_00_step_3_software_without_secrets(executed, course_out):
    _, results = executed("00_environment_check")
    assert results["accelerate_env_ok"] is True
    assert "HF_TOKEN" in results["env_signals"] and "HF_TOKEN" in results["env_redacted"]  # listed, value hidden
    assert set(results["env_redacted"]) <= set(results["env_signals"])
    _, printed = _printed(course_out, "00_environment_check")
    assert "<python prefix>/bin/accelerate" in printed and f"{sys.prefix}/bin" not in printed  # no venv path


def test_00_step_4_disk_and_network(executed):
    _, results = executed("00_environment_check")
    assert 0 < results["disk"]["free_gib"] <= results["disk"]["total_gib"]
    assert "budget_used_gb" not in results["disk"]  # only Kaggle caps the working folder
    assert results["internet"] is False  # the test machine is offline; the probe must say so, not hang
    assert results["internet_probed"] is results["parameters"]["check_internet"] is True  # it did probe


def test_00_step_5_what_to_tell_accelerate(executed, course_out):
    from freegpu.hardware import FREE_GPUS, dataloader_workers

    _, results = executed("00_environment_check")
    rec = results["recommendation"]
    assert rec["mixed_precision"] == "no" and rec["num_processes"] == 1
    # The same rule notebook 04 measures, applied to the CPUs the notebook recorded (not this test's machine).
    assert rec["num_workers"] == dataloader_workers(results["logical_cpus"], 1)
    assert set(rec) == {"mixed_precision", "num_processes", "num_workers"}
    _, printed = _printed(course_out, "00_environment_check")  # each setting printed with the fact behind it
    assert "mixed_precision = 'no': a CPU, where Accelerate's fp16 does nothing" in printed
    assert f"num_workers = {rec['num_workers']}: {results['logical_cpus']} CPU(s) per process" in printed
    config = course_out / "results" / "00_environment_check" / results["accelerate_config"]
    loaded = load_config_from_file(str(config))  # the loader `accelerate launch --config_file` uses
    assert loaded.mixed_precision == rec["mixed_precision"] and loaded.use_cpu is True
    assert results["accelerate_config_loaded"]["distributed_type"] == "NO"
    sims = results["simulated_recommendations"]
    assert list(sims) == list(FREE_GPUS)  # every box of the one home of the simulated GPUs
    # No num_workers for a simulated box: it would come from this machine's CPUs, not the session's (issue 26).
    assert sims["Kaggle GPU T4 x2"] == {"mixed_precision": "fp16", "num_processes": 2}
    assert not any("num_workers" in box for box in sims.values())
    assert sims["Colab Pro A100"]["mixed_precision"] == "bf16" and sims["Colab T4"]["mixed_precision"] == "fp16"


def test_00_runs_with_nbconvert_and_no_parameters(tmp_path):
    """`jupyter nbconvert --execute` with the defaults: the smoke profile, outputs under ./outputs."""
    notebook = tmp_path / "00_environment_check.ipynb"
    notebook.write_text((NOTEBOOK_DIR / notebook.name).read_text())
    env = {**os.environ, "PATH": f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}"}
    subprocess.run([sys.executable, "-m", "nbconvert", "--to", "notebook", "--execute", str(notebook),
                    "--output", "executed.ipynb"], cwd=tmp_path, env=env, check=True, capture_output=True)
    results = json.loads((tmp_path / "outputs" / "00_environment_check" / "results.json").read_text())
    assert results["profile"] == "smoke" and results["platform"] == "headless"
    assert results["platform_evidence"] == "parent=nbconvert"


def test_course_site_and_summary(course_site, course_out):
    """The course build on real runs: summary.json lists every run, and each notebook has a page on the site
    whose measurements page shows the run's headline results."""
    summary = json.loads((course_out / "summary.json").read_text())
    assert [(n["name"], n["lane"]) for n in summary["notebooks"]] == \
        [(name, lane) for lane in ("main", "zh") for name in NOTEBOOK_NAMES]
    for entry in summary["notebooks"]:
        site = course_site / "zh" if entry["lane"] == "zh" else course_site  # the zh edition: site/zh/
        measurements = (site / "measurements.html").read_text()
        assert entry["status"] == "ok" and entry["wall_s"] > 0 and entry["peak_rss_mb"] > 0
        assert (course_out / entry["results"]).is_file()
        assert (site / "notebooks" / f"{entry['name']}.html").is_file()
        assert f'notebooks/{entry["name"]}.html' in (site / "index.html").read_text()
        headline = json.loads((course_out / entry["results"]).read_text())["headline"]
        assert headline and all(key in measurements for key in headline), entry["name"]
        if (NOTEBOOK_DIR / "solutions" / f"{entry['name']}.py").is_file():  # ran, and shown collapsed (hide-cell)
            ran = [c for c in nbformat.read(course_out / entry["executed"], as_version=4).cells
                   if "solution" in c.metadata.get("tags", [])]
            page = (site / "notebooks" / f"{entry['name']}.html").read_text()
            assert ran and page.count('<div class="cell tag_solution tag_hide-cell') == len(ran), entry["name"]


def _printed(course_out, name: str) -> tuple[list[dict], str]:
    """The outputs of an executed notebook's code cells, and all the text they printed."""
    outputs = [o for c in json.loads((course_out / "executed" / f"{name}.ipynb").read_text())["cells"]
               if c["cell_type"] == "code" for o in c["outputs"]]
    return outputs, "".join("".join(o.get("text", "")) for o in outputs)


def test_01_steps_1_to_3_the_migration_is_exact(executed, course_out):
    _, results = executed("01_mnist_migration")
    assert results["parameters"]["num_processes"] == 2 and results["parameters"]["profile"] == "smoke"
    assert results["data_source"].startswith("sklearn.datasets.load_digits")
    assert (results["train_size"], results["eval_size"]) == (1438, 359)
    # The migration is exact on a CPU: same losses, same weights, bit for bit.
    assert results["max_abs_loss_diff"] == 0.0 and results["max_abs_weight_diff"] == 0.0
    assert results["plain_eval_accuracy"] == results["single_process_eval_accuracy"] >= 0.90
    assert results["changed_lines"] >= 4  # the diff was computed from the real functions
    _, printed = _printed(course_out, "01_mnist_migration")
    assert "+    model, optimizer, dataloader = accelerator.prepare(model, optimizer, dataloader)  # NEW" in printed
    assert "identical, bit for bit" in printed


def test_01_step_4_notebook_launcher(executed, course_out):
    _, results = executed("01_mnist_migration")
    # The launcher's branch was decided before launching, and recorded.
    assert results["launcher_branch"] == "multi_cpu" and results["launcher_branch_processes"] == 2
    assert results["launcher_branch_in_process"] is False
    # The fork-hang fix gave the forked processes one thread, not the kernel.
    assert results["kernel_threads_unchanged"] is True
    assert results["launcher_ran_in_kernel"] == [False, False]
    # The trap: two forked processes that each trained alone on everything.
    assert results["launcher_trap_independent_runs"] is True
    assert results["launcher_trap_samples_per_rank"] == [results["train_size"]] * 2
    # The fix: one process group of two, each rank with half of the batches.
    assert results["ddp_launched_by"].startswith("notebook_launcher")
    assert results["ddp_num_processes"] == 2 and results["ddp_distributed_type"] == "MULTI_CPU"
    per_rank = results["ddp_samples_per_rank"]
    assert len(per_rank) == 2 and per_rank[0] == per_rank[1]
    assert results["train_size"] <= sum(per_rank) < results["train_size"] + 2 * 64  # even_batches pads < a batch
    assert results["ddp_steps_per_rank"] == [results["parameters"]["num_epochs"] * -(-per_rank[0] // 64)] * 2
    assert results["ddp_parent_is_notebook"] is True  # forked from the kernel, not spawned
    assert results["eval_size"] % 2 == 1
    assert results["gather_for_metrics_count"] == results["eval_size"] < results["gather_count"]
    # Accuracy after the smoke training, and the saved model reloaded without Accelerate.
    assert results["eval_accuracy"] >= 0.90
    assert results["eval_accuracy_reloaded"] == results["eval_accuracy"]
    assert results["model_files"] == ["model.safetensors"]
    # Quiet: no warning from Accelerate about threads, no stray value printed by a cell.
    outputs, printed = _printed(course_out, "01_mnist_migration")
    assert "OMP_NUM_THREADS" not in printed
    assert not any(o["output_type"] == "execute_result" for o in outputs)


def test_01_step_5_script_launch(executed, course_out):
    _, results = executed("01_mnist_migration")
    out = course_out / "results" / "01_mnist_migration"
    # The script's launch, each process reporting through a file: torchrun started two.
    assert results["script_launch_processes"] == 2 and results["script_launch_world_size"] == 2
    assert sorted(p.name for p in (out / "torchrun").iterdir()) == ["rank_0.json", "rank_1.json"]
    assert (out / "script_model" / "model.safetensors").is_file()
    _, printed = _printed(course_out, "01_mnist_migration")
    assert "$ torchrun --standalone --nproc_per_node 2 train_mnist.py --cpu --data_file digits.pt" in printed
    script = (out / "train_mnist.py").read_text()
    assert "freegpu" not in script and "def train_accelerate(" in script  # copyable: no course package
    assert (out / "digits.pt").is_file()  # the smoke data, handed to the script as tensors
    assert all(f'"--{flag}"' in script for flag in ("cpu", "mixed_precision", "num_epochs", "batch_size"))


def test_01_full_profile_offline_fails_fast(tmp_path):
    """profile='full' without the Hub stops in the first step, naming what to do, in seconds."""
    import time

    start = time.perf_counter()
    with pytest.raises(papermill.PapermillExecutionError) as info:
        papermill.execute_notebook(str(NOTEBOOK_DIR / "01_mnist_migration.ipynb"), str(tmp_path / "out.ipynb"),
                                   parameters={"profile": "full", "output_dir": str(tmp_path / "run")},
                                   kernel_name="python3", cwd=str(tmp_path), progress_bar=False)
    assert info.value.ename == "RuntimeError" and "profile='smoke'" in info.value.evalue, info.value.evalue
    assert time.perf_counter() - start < 45
    assert not (tmp_path / "run" / "results.json").exists()


def check_04_loader_half(results, out):
    """Steps 1-2 of notebook 04, which run the same in both environments. Read from the run, not this machine."""
    from freegpu.hardware import dataloader_workers

    cpus = results["logical_cpus"]  # the CPUs the notebook could use (its affinity mask), as it recorded them
    counts = results["loader_worker_counts"]
    assert counts[0] == 0 and 2 in counts and counts[-1] == min(4 * cpus, 32)
    assert results["rule_num_workers"] == dataloader_workers(cpus, 1)
    assert results["rule_num_workers"] in counts  # notebook 00's recommendation was measured too
    measured = results["workers_samples_per_s"]
    assert sorted(int(n) for n in measured) == counts
    for spread in measured.values():
        assert spread["n"] == 3 and 0 < spread["min"] <= spread["median"] <= spread["max"]
    assert results["best_num_workers"] in counts
    best = measured[str(results["best_num_workers"])]["median"]
    assert all(s["median"] <= best for s in measured.values())
    assert results["memmap_header_values"] == 32  # np.memmap on a .npy file: its 128-byte header read as 32 floats
    ratio = results["memmap_vs_memory_ratio"]
    assert ratio["n"] == 3 and 0 < ratio["min"] <= ratio["median"] <= ratio["max"] < 10
    assert results["parameters"]["loader_samples"] > 0 and results["parameters"]["profile"] == "smoke"


def test_04_tpu_data_loaders_without_xla(executed, course_out):
    record, results = executed("04_tpu_data_loaders")
    check_04_loader_half(results, course_out / "results" / "04_tpu_data_loaders")
    if importlib.util.find_spec("torch_xla") is None:
        assert results["xla_ran"] is False and results["xla_version"] is None
        assert results["pjrt_device"] == os.environ.get("PJRT_DEVICE")  # read, never set without torch_xla
        # Values are recorded where they are measured: the XLA steps that did not run recorded nothing.
        assert "compiles_varying_per_step" not in results and "accelerate_distributed_type" not in results
    outputs = [o for c in json.loads((course_out / "executed" / "04_tpu_data_loaders.ipynb").read_text())["cells"]
               if c["cell_type"] == "code" for o in c["outputs"]]
    assert not any(o["output_type"] == "execute_result" for o in outputs)  # no stray values under cells
    printed = "".join("".join(o.get("text", "")) for o in outputs)
    assert "fastest here: num_workers=" in printed and "; resolved: " in printed  # measure.compare's verdict
    # PyTorch's own warnings, shown under step 1's cells: no accelerator here, and more workers than CPUs.
    if results["device"] == "cpu":
        assert "'pin_memory' argument is set as true" in printed and results["batch_pinned"] is False
    if results["loader_worker_counts"][-1] > results["logical_cpus"]:
        assert "suggested max number of worker" in printed
