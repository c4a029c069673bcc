"""freegpu.hardware: GPUs and TPUs simulated from what nvidia-smi and a TPU VM report."""

from __future__ import annotations

from dataclasses import replace

import pytest

from freegpu import hardware

T4 = "Tesla T4, 15360, 7.5, 550.54.15"
A100 = "NVIDIA A100-SXM4-40GB, 40960, 8.0, 550.54.15"
P100 = "Tesla P100-PCIE-16GB, 16384, 6.0, 550.54.15"
TOPO_PCIE = "\tGPU0\tGPU1\nGPU0\t X \tPHB\nGPU1\tPHB\t X \n"
TOPO_NVLINK = "\tGPU0\tGPU1\nGPU0\t X \tNV12\nGPU1\tNV12\t X \n"


def box(smi: str = "", topology: str = "", environ: dict | None = None, cuda: str | None = "12.8"):
    hw = hardware.detect_hardware(environ=environ or {}, nvidia_smi=smi, topology=topology)
    return replace(hw, torch_cuda=cuda)


def test_parse_nvidia_smi():
    (gpu,) = hardware.parse_nvidia_smi(T4 + "\n")
    assert gpu.name == "Tesla T4" and gpu.memory_gib == 15.0 and gpu.compute_capability == (7, 5)
    assert gpu.fp16_tensor_cores and not gpu.bf16_tensor_cores


def test_this_machine_is_read():
    hw = hardware.detect_hardware()
    assert hw.logical_cpus >= 1 and hw.physical_cpus >= 1 and hw.ram_total_gib > 0
    if hw.device_kind == "cpu":
        assert hardware.recommend(hw).mixed_precision == "no"


def test_cpu_recommendation_and_traps():
    hw = box(cuda=None)
    rec = hardware.recommend(hw)
    assert (hw.device_kind, rec.mixed_precision, rec.num_processes) == ("cpu", "no", 1)
    assert (rec.num_workers, rec.reasons["num_workers"]) == hardware.dataloader_workers(hw.logical_cpus, 1)
    traps = " ".join(hardware.pitfalls(hw, "headless"))
    assert "fp16" in traps and "cpu=True" in traps and "set_num_threads(1)" in traps


@pytest.mark.parametrize("cpus, procs, workers",
                         [(2, 1, 2), (4, 2, 2), (4, 1, 4), (3, 1, 3), (8, 2, 4), (1, 1, 0), (2, 2, 0), (3, 2, 0)])
def test_dataloader_workers_rule(cpus, procs, workers):
    found, why = hardware.dataloader_workers(cpus, procs)
    assert found == workers and f"{cpus} CPUs / {procs} process(es)" in why


def test_kaggle_t4_x2_without_nvlink():
    hw = box(f"{T4}\n{T4}", TOPO_PCIE)
    rec = hardware.recommend(hw)
    assert (hw.device_kind, rec.mixed_precision, rec.num_processes) == ("cuda", "fp16", 2)
    assert hw.nvlink is False
    traps = hardware.pitfalls(hw, "kaggle")
    assert any("without NVLink" in t for t in traps)
    assert any("emulated" in t for t in traps)  # bf16 on a T4
    assert any("20 GB" in t for t in traps)


def test_nvlink_pair_has_no_pcie_warning():
    hw = box(f"{A100}\n{A100}", TOPO_NVLINK)
    assert hw.nvlink is True and hardware.recommend(hw).mixed_precision == "bf16"
    assert not any("NVLink" in t for t in hardware.pitfalls(hw, "local"))


def test_p100_with_a_new_cuda_build_is_flagged():
    traps = hardware.pitfalls(box(P100, cuda="12.8"), "kaggle")
    assert any("cudaErrorNoKernelImageForDevice" in t for t in traps)
    assert hardware.recommend(box(P100)).mixed_precision == "no"
    assert not any("NoKernelImage" in t for t in hardware.pitfalls(box(P100, cuda="11.8"), "kaggle"))


@pytest.mark.parametrize("accel_type, chips", [("v5litepod-8", 8), ("v5litepod-1", 1)])
def test_tpu_from_environment(accel_type, chips):
    hw = box(environ={"TPU_ACCELERATOR_TYPE": accel_type, "PJRT_DEVICE": "TPU"}, cuda=None)
    assert hw.device_kind == "tpu" and hw.tpu.chips == chips and hw.tpu.pjrt_device == "TPU"
    rec = hardware.recommend(hw)
    assert rec.mixed_precision == "bf16" and rec.num_processes == chips
    assert any("PJRT_DEVICE=TPU" in t for t in hardware.pitfalls(hw, "kaggle"))


def test_disk_report_with_budget(tmp_path):
    (tmp_path / "ckpt.bin").write_bytes(b"\0" * 5_000_000)
    report = hardware.disk_report(tmp_path, budget_bytes=20 * 1000**3)
    assert report["budget_gib"] == 20.0 and report["budget_used_gib"] == 0.005
    assert 0 < report["free_gib"] <= report["total_gib"]
    (tmp_path / "notebook").mkdir()
    whole = hardware.disk_report(tmp_path / "notebook", budget_bytes=20 * 1000**3, budget_dir=tmp_path)
    assert whole["budget_used_gib"] == 0.005 and whole["path"].endswith("notebook")
