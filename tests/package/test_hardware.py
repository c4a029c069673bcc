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


def test_cpu_recommendation():
    hw = box(cuda=None)
    rec = hardware.recommend(hw)
    assert (hw.device_kind, rec.mixed_precision, rec.num_processes) == ("cpu", "no", 1)
    assert rec.num_workers == hardware.dataloader_workers(hw.logical_cpus, 1)


@pytest.mark.parametrize("cpus, procs, workers",
                         [(2, 1, 2), (4, 2, 2), (4, 1, 4), (3, 1, 3), (8, 2, 4), (1, 1, 0), (2, 2, 0), (3, 2, 0)])
def test_dataloader_workers_rule(cpus, procs, workers):
    assert hardware.dataloader_workers(cpus, procs) == workers


def test_kaggle_t4_x2_without_nvlink():
    hw = box(f"{T4}\n{T4}", TOPO_PCIE)
    rec = hardware.recommend(hw)
    assert (hw.device_kind, rec.mixed_precision, rec.num_processes) == ("cuda", "fp16", 2)
    assert hw.nvlink is False and all(not gpu.bf16_tensor_cores for gpu in hw.gpus)
    assert rec.num_workers == hardware.dataloader_workers(hw.logical_cpus, 2)


def test_nvlink_pair():
    hw = box(f"{A100}\n{A100}", TOPO_NVLINK)
    assert hw.nvlink is True and hardware.recommend(hw).mixed_precision == "bf16"


def test_the_oldest_gpu_decides():
    assert hardware.recommend(box(P100)).mixed_precision == "no"  # no tensor cores
    assert hardware.recommend(box(f"{T4}\n{A100}")).mixed_precision == "fp16"  # the T4 has no bf16 ones


def test_free_gpus_are_parsed():
    """The one home of the simulated GPU boxes (notebooks 00 and 02): every text parses, one GPU per line."""
    for box_name, smi in hardware.FREE_GPUS.items():
        gpus = hardware.parse_nvidia_smi(smi)
        assert len(gpus) == smi.count("\n") + 1 and all(g.fp16_tensor_cores for g in gpus), box_name


@pytest.mark.parametrize("accel_type, chips", [("v5litepod-8", 8), ("v5litepod-1", 1)])
def test_tpu_from_environment(accel_type, chips):
    hw = box(environ={"TPU_ACCELERATOR_TYPE": accel_type, "PJRT_DEVICE": "TPU"}, cuda=None)
    assert hw.device_kind == "tpu" and hw.tpu.chips == chips and hw.tpu.pjrt_device == "TPU"
    rec = hardware.recommend(hw)
    assert rec.mixed_precision == "no" and rec.num_processes == chips  # fp32: XLA_USE_BF16 (notebook 05)



def test_the_rules_stand_on_what_the_sources_and_the_course_show():
    """Issue 26 (maintainer items 10, 20, 21): each rule of `recommend` (its docstring, notebook 00's prose) pinned
    to what decides it."""
    import inspect

    from accelerate import Accelerator

    init = inspect.getsource(Accelerator.__init__)
    # fp16 on a CPU: the scaler and native AMP are set up only off the CPU, so Accelerate's fp16 does nothing there
    assert 'self.state.mixed_precision == "fp16"\n            and self.device.type != "cpu"' in init
    rules = inspect.getdoc(hardware.recommend)
    assert "fp16 does nothing" in rules and "depends on the CPU" in rules and "rarely" not in rules  # 02 times nothing
    tpu = hardware.recommend(box(environ={"TPU_ACCELERATOR_TYPE": "v5litepod-8", "PJRT_DEVICE": "TPU"}, cuda=None))
    assert tpu.mixed_precision == "no" and "on a TPU stores the weights in bf16" in rules
    assert hardware.dataloader_workers(1, 1) == 0
    assert "with no model step" in inspect.getdoc(hardware.dataloader_workers)  # 04 measures no GPU step
