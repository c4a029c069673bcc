"""Notebook 02 (mixed precision) and its helpers: freegpu.precision, models.build_row_transformer."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from types import SimpleNamespace

import papermill
import pytest
import torch
import torch.nn.functional as F
from conftest import NOTEBOOK_DIR

from freegpu.hardware import HardwareInfo, TpuInfo, detect_hardware
from freegpu.measure import SavedTensors
from freegpu.models import build_row_transformer
from freegpu.precision import (
    DtypeTrace,
    article_verdicts,
    claim_verdicts,
    dtypes_of,
    measured_mode,
    pick_mixed_precision,
    precision_in_effect,
    scaler_settings,
    step_times,
    with_peak,
)

NAME = "02_mixed_precision"
T4 = "Tesla T4, 15360, 7.5, 550.54"
P100 = "Tesla P100-PCIE-16GB, 16384, 6.0, 550.54"
A100 = "NVIDIA A100-SXM4-40GB, 40960, 8.0, 550.54"
TORCH_SCALER = {"class": "torch.amp.grad_scaler.GradScaler", "enabled": True, "scale": 65536.0,
                "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2000}


def gpu(smi: str) -> HardwareInfo:
    return detect_hardware(environ={}, nvidia_smi=smi, topology="")


def cpu() -> HardwareInfo:
    return detect_hardware(environ={}, nvidia_smi="")


def tpu() -> HardwareInfo:
    return HardwareInfo(2, 1, 8.0, 6.0, tpu=TpuInfo("2.9.0", "TPU", "v5litepod-8", 8))


# --- helpers, no kernel ---------------------------------------------------------------------------------------

def test_pick_mixed_precision_turns_cpu_fp16_into_no_with_a_warning():
    choice = pick_mixed_precision(cpu(), "fp16")
    assert choice.mode == "no" and "does nothing on a CPU" in choice.warning
    assert pick_mixed_precision(cpu(), "bf16") == ("bf16", "mixed_precision='bf16' was asked for", None)
    assert pick_mixed_precision(cpu(), "auto").mode == "no" and pick_mixed_precision(cpu(), "auto").warning is None


def test_pick_mixed_precision_on_simulated_gpus_and_tpu():
    assert pick_mixed_precision(gpu(T4), "auto").mode == "fp16"
    t4_bf16 = pick_mixed_precision(gpu(T4), "bf16")
    assert t4_bf16.mode == "bf16" and "no bf16 tensor cores" in t4_bf16.warning and "Tesla T4" in t4_bf16.warning
    assert pick_mixed_precision(gpu(P100), "auto").mode == "no"
    assert pick_mixed_precision(gpu(A100), "auto").mode == "bf16"
    assert pick_mixed_precision(gpu(A100), "bf16").warning is None
    assert pick_mixed_precision(gpu(A100), "fp16") == ("fp16", "mixed_precision='fp16' was asked for", None)
    tpu_fp16 = pick_mixed_precision(tpu(), "fp16")
    assert tpu_fp16.mode == "bf16" and "refuses fp16" in tpu_fp16.warning
    with pytest.raises(ValueError, match="'fp8'"):
        pick_mixed_precision(cpu(), "fp8")


def test_measured_mode_is_the_mode_that_runs_for_real():
    assert measured_mode(cpu())[:2] == ("bf16", False) and "fp16 would do nothing" in measured_mode(cpu()).reason
    assert measured_mode(gpu(T4))[:2] == ("fp16", False) and "T4" in measured_mode(gpu(T4)).reason
    assert measured_mode(gpu(f"{T4}\n{T4}")).mode == "fp16"  # Kaggle's GPU T4 x2
    assert measured_mode(gpu(A100))[:2] == ("bf16", False)
    assert measured_mode(gpu(f"{A100}\n{T4}")).mode == "fp16"  # the weakest GPU decides
    assert measured_mode(tpu())[:2] == ("bf16", True)  # a TPU: the host CPU runs this notebook


def test_precision_in_effect_detects_a_noop():
    scaler = torch.amp.GradScaler("cpu")
    fp16_cpu = SimpleNamespace(mixed_precision="fp16", native_amp=False, scaler=None)
    fp16_gpu = SimpleNamespace(mixed_precision="fp16", native_amp=True, scaler=scaler)
    plain = SimpleNamespace(mixed_precision="no", native_amp=False, scaler=None)
    assert precision_in_effect(fp16_cpu) == {"reports": "fp16", "runs": "no", "native_amp": False, "scaler": None,
                                             "noop": True}
    assert precision_in_effect(fp16_gpu)["runs"] == "fp16" and precision_in_effect(fp16_gpu)["noop"] is False
    assert precision_in_effect(fp16_gpu)["scaler"] == TORCH_SCALER
    assert precision_in_effect(plain)["noop"] is False


def test_a_real_cpu_fp16_accelerator_is_a_noop():
    """In a fresh process: Accelerate keeps one configuration per process."""
    code = ("import json; from accelerate import Accelerator; from freegpu.precision import precision_in_effect; "
            "print(json.dumps(precision_in_effect(Accelerator(mixed_precision='fp16', cpu=True))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    effect = json.loads(done.stdout.strip().splitlines()[-1])
    assert effect == {"reports": "fp16", "runs": "no", "native_amp": False, "scaler": None, "noop": True}


def test_scaler_settings_read_torch_defaults_and_accelerates_factory():
    from accelerate.utils import get_grad_scaler

    assert scaler_settings(torch.amp.GradScaler("cpu")) == TORCH_SCALER
    assert scaler_settings(get_grad_scaler()) == TORCH_SCALER
    custom = scaler_settings(torch.amp.GradScaler("cpu", init_scale=8.0, growth_interval=3))
    assert custom["scale"] == 8.0 and custom["growth_interval"] == 3


def test_dtype_trace_sees_what_autocast_runs():
    layer = torch.nn.Linear(8, 4)
    x = torch.randn(5, 8)
    with DtypeTrace() as fp32:
        layer(x).sum().backward()
    assert set(fp32.op_dtypes().values()) == {"float32"} and fp32.count("addmm") == 1
    with DtypeTrace() as forward, torch.autocast("cpu", dtype=torch.bfloat16):
        y = layer(x)
    ops = forward.op_dtypes()
    assert ops["addmm"] == "bfloat16" and y.dtype == torch.bfloat16
    assert forward.signatures()["addmm"] == "(bfloat16, bfloat16, bfloat16) -> bfloat16"
    assert forward.signatures()["_to_copy(float32->bfloat16)"] == "(float32) -> bfloat16"
    assert forward.count("_to_copy(float32->bfloat16)") == 3  # weight, bias and input: temporary copies
    assert layer.weight.dtype == torch.float32
    with DtypeTrace() as backward:
        y.float().sum().backward()
    assert backward.op_dtypes()["mm"] == "bfloat16" and layer.weight.grad.dtype == torch.float32
    assert "t" not in backward.op_dtypes() and "view" not in forward.op_dtypes()  # layout ops are left out


def test_claim_verdicts_name_the_mode_they_rest_on():
    """The GPU branch (fp16 is the claim's own mode) runs here with PyTorch's fp16 autocast on a CPU layer."""
    layer, x = torch.nn.Linear(8, 4), torch.randn(5, 8)
    with DtypeTrace() as forward, torch.autocast("cpu", dtype=torch.float16):
        y = layer(x)
        weights = dtypes_of(layer.parameters())
    with DtypeTrace() as backward:
        y.float().sum().backward()
    fp16 = claim_verdicts(forward, backward, "fp16", weights, dtypes_of([layer.weight.grad]))
    assert fp16[0] == "evidence: an fp16 run, the claim's own mode"
    assert fp16[1].startswith("claim 'weights converted to FP16': does not hold in float16: the weights stay")
    assert "(mm) ran in float16; .grad is ['torch.float32'] only because" in fp16[2]
    bf16 = claim_verdicts(forward, backward, "bf16", weights, ["torch.float32"])
    assert bf16[0].startswith("evidence: a bf16 run: Accelerate's fp16 does nothing on a CPU")
    assert "does not hold in bfloat16" in bf16[1]  # bf16 evidence is never called fp16


def test_step_times_says_when_a_ratio_is_resolved():
    import time

    def train(name, steps):
        time.sleep(0.03 * steps if name == "slow" else 0.0)

    times, text = step_times(train, ("fast", "slow"), steps=1, trials=3)
    assert times["step_time_resolved"] is True and times["step_time_ratio"] > 10
    assert [s["n"] for s in times["step_time_ms"].values()] == [3, 3] and "not resolved" not in text
    same, text = step_times(lambda name, steps: None, ("a", "b"), steps=1, trials=3)
    if not same["step_time_resolved"]:
        assert "not resolved on this machine" in text


def test_article_verdicts_on_a_gpu_and_without_one():
    saved = {"activation_bytes": {"no": 100, "fp16": 55}}
    times = {"step_time_ratio": 0.5, "step_time_resolved": True}
    gpu = article_verdicts(saved, times, {"no": 1000, "fp16": 800}, "fp16", True)
    assert gpu[0] == "activations, fp16: 45% fewer bytes kept for backward than fp32."
    assert "GPU peak memory, fp16 / fp32: 0.80." in gpu and "tensor cores" not in gpu[3]
    cpu = article_verdicts(saved, {"step_time_ratio": 1.0, "step_time_resolved": False}, {}, "fp16", False)
    assert any("not measured, there is no CUDA GPU here" in line for line in cpu)
    assert "not resolved on this machine" in cpu[3] and "with differences" in cpu[4]
    assert with_peak(torch.device("cpu"), lambda a: a + 1, 1) == (2, None)


def test_row_transformer_shapes_and_bf16_oracle():
    """bf16 autocast changes the loss by rounding only, and keeps at most 0.7 of fp32's saved activations."""
    torch.manual_seed(0)
    model = build_row_transformer(8, 8, 32, 2, 10)
    images, labels = torch.rand(16, 64), torch.randint(0, 10, (16,))
    assert model(images).shape == (16, 10)
    with SavedTensors() as saved32:
        loss32 = F.cross_entropy(model(images), labels)
    with SavedTensors() as saved16, torch.autocast("cpu", dtype=torch.bfloat16):
        loss16 = F.cross_entropy(model(images), labels)
    assert loss16.dtype == torch.float32  # cross-entropy is on autocast's fp32 list
    assert abs(loss16.item() - loss32.item()) / loss32.item() < 0.02
    assert saved16.by_dtype.get("bfloat16", 0) > 0 and "bfloat16" not in saved32.by_dtype
    assert saved16.activation_bytes <= 0.7 * saved32.activation_bytes


# --- the notebook -------------------------------------------------------------------------------------------

@pytest.mark.notebook
def test_02_trace_and_scaling(executed):
    _, r = executed(NAME)
    assert "load_digits" in r["data_source"] and r["measured_on"] == "cpu" and r["model_width"] == 64
    assert r["measured_mode"] == "bf16" and "CPU" in r["measured_mode_reason"]
    assert r["measured_on_host_cpu"] is False  # True only on a TPU (see test_measured_mode_...)
    facts = r["format_facts"]
    assert facts["fp16"]["max"] == 65504.0 and facts["bf16"]["max"] > 3e38 and facts["fp32"]["max"] > 3e38
    assert facts["fp16"]["eps"] == 2**-10 and facts["bf16"]["eps"] == 2**-7 and facts["fp32"]["eps"] == 2**-23
    assert facts["fp16"]["smallest_normal"] == 2**-14
    assert facts["bf16"]["smallest_normal"] == facts["fp32"]["smallest_normal"]  # fp32's exponent range
    assert [facts[f]["bits"] for f in ("fp32", "fp16", "bf16")] == [32, 16, 16]
    assert facts["fp16"]["stores"] == {"70000.0": "inf", "1e-08": "0", "1.001": "1.00098"}
    assert facts["bf16"]["stores"]["1.001"] == "1" and math.isclose(float(facts["bf16"]["stores"]["70000.0"]), 7e4,
                                                                     rel_tol=0.01)
    assert math.isclose(float(facts["bf16"]["stores"]["1e-08"]), 1e-8, rel_tol=0.01)
    assert facts["fp32"]["stores"] == {"70000.0": "70000", "1e-08": "1e-08", "1.001": "1.001"}
    # Matrix multiplications in bf16, the loss in fp32, weights, gradients and optimizer state in fp32.
    ops = r["autocast_op_dtypes"]
    assert ops["addmm"] == ops["mm"] == "bfloat16"
    assert any("scaled_dot_product" in op and dtype == "bfloat16" for op, dtype in ops.items())
    assert ops["_log_softmax"] == ops["nll_loss_forward"] == "float32"
    assert "_to_copy(float32->bfloat16)" in ops and "_to_copy(bfloat16->float32)" in ops
    assert r["autocast_weight_casts"] >= 2 * (2 + 4 * r["parameters"]["num_layers"])  # every weight and bias
    assert r["backward_op_dtypes"]["mm"] == "bfloat16" and r["backward_op_dtypes"]["nll_loss_backward"] == "float32"
    assert r["param_dtype_during_autocast"] == r["grad_dtype"] == r["optimizer_state_dtype"] == ["torch.float32"]
    assert r["model_output_dtype"] == "torch.float32"  # convert_outputs_to_fp32
    assert r["accelerator_effect"] == {"reports": "bf16", "runs": "bf16", "native_amp": True, "scaler": None,
                                       "noop": False}
    assert r["accelerate_same_ops"] is r["accelerate_same_logits"] is r["accelerate_is_native_amp"] is True
    # fp16 evidence from PyTorch's autocast alone (Accelerate's fp16 does nothing on a CPU).
    fp16_ops = r["native_fp16_op_dtypes"]
    assert fp16_ops["addmm"] == "float16" and fp16_ops["nll_loss_forward"] == "float32"
    assert r["native_fp16_param_dtype"] == ["torch.float32"]
    # Loss scaling, live on the CPU.
    assert r["fp16_underflow_without_scaling"] is True and r["fp16_survives_with_scaling"] is True
    assert 0 <= r["fp16_rescued_relative_error"] < 1e-2
    assert r["accelerate_scaler"] == TORCH_SCALER and r["accelerate_scaler_is_torch_default"] is True


@pytest.mark.notebook
def test_02_grad_scaler_walk_follows_the_rules(executed):
    _, r = executed(NAME)
    walk, interval = r["scaler_walk"], r["scaler_growth_interval"]
    assert interval == r["parameters"]["scaler_growth_interval"] == 2
    assert [w["step"] for w in walk] == list(range(8)) and walk[0]["scale"] == 65536.0
    assert r["scaler_scales"] == [w["scale"] for w in walk] + [walk[-1]["next_scale"]]
    assert r["scaler_skipped_steps"] == [w["step"] for w in walk if w["skipped"]]
    outlier = r["scaler_outlier_step"]
    assert outlier == 5 and outlier in r["scaler_skipped_steps"] and walk[outlier]["loss"] in ("nan", "inf")
    good_run, optimizer_steps = 0, 0
    for w in walk:
        assert walk[w["step"] - 1]["next_scale"] == w["scale"] if w["step"] else True
        if w["skipped"]:  # halve the scale, keep the weights and AdamW's step count
            good_run = 0
            assert w["next_scale"] == w["scale"] / 2 and w["optimizer_steps"] == optimizer_steps
        else:
            good_run += 1
            optimizer_steps += 1
            assert math.isfinite(float(w["loss"])) and w["optimizer_steps"] == optimizer_steps
            grows = good_run % interval == 0
            assert w["next_scale"] == w["scale"] * (2 if grows else 1)
    assert max(r["scaler_scales"]) > 65536.0  # it grew at least once


@pytest.mark.notebook
def test_02_traps_and_recommendations(executed):
    _, r = executed(NAME)
    assert r["cpu_fp16_effect"] == {"reports": "fp16", "runs": "no", "native_amp": False, "scaler": None,
                                    "noop": True}
    assert r["cpu_fp16_op_dtypes"] == ["float32"] and r["cpu_fp16_is_noop"] is True
    assert r["requested_mixed_precision"] == "auto" and r["recommended_mixed_precision"] == "no"
    assert r["recommendation_warning"] is None
    assert r["simulated_choices"] == {  # the GPUs Colab and Kaggle hand out today (Kaggle's P100 is retired)
        "Colab T4": {"auto": "fp16", "bf16 request warns": True},
        "Kaggle GPU T4 x2": {"auto": "fp16", "bf16 request warns": True},
        "Colab Pro L4": {"auto": "bf16", "bf16 request warns": False},
        "Colab Pro A100": {"auto": "bf16", "bf16 request warns": False},
    }


@pytest.mark.notebook
def test_02_measurements(executed):
    _, r = executed(NAME)
    params = r["parameters"]
    assert params["profile"] == "smoke" and params["mixed_precision"] == "auto" and params["d_model"] == 0
    saved = r["activation_bytes"]
    assert set(saved) == {"no", "bf16", "fp16"} and saved["bf16"] > 0
    assert r["activation_bytes_ratio"] == saved["bf16"] / saved["no"]
    assert 0.4 < r["activation_bytes_ratio"] <= 0.7  # a transformer block, not only an MLP
    assert 0.4 < saved["fp16"] / saved["no"] <= 0.7  # PyTorch's fp16 autocast: 2 bytes, like bf16
    by_dtype = r["activation_bytes_by_dtype"]
    assert by_dtype["fp16"].get("float16", 0) > 0 and sum(by_dtype["no"].values()) == saved["no"]
    times = r["step_time_ms"]
    for spread in times.values():
        assert spread["n"] == params["timing_trials"] and 0 < spread["min"] <= spread["median"] <= spread["max"]
    assert r["step_time_ratio"] == times["bf16"]["median"] / times["no"]["median"]
    assert 0.2 < r["step_time_ratio"] < 20  # CPU: no tensor cores; recorded, not a speed claim
    resolved = times["bf16"]["min"] > times["no"]["max"] or times["bf16"]["max"] < times["no"]["min"]
    assert r["step_time_resolved"] is resolved
    assert ("step_time_ratio" if resolved else "step_time_resolved") in r["headline"]
    assert r["train_steps"] == params["train_steps"]
    loss, accuracy = r["final_loss"], r["final_accuracy"]
    assert set(loss) == set(accuracy) == {"no", "bf16"}
    assert all(0 < value < 1.0 for value in loss.values())  # it learned: chance is ln(10) = 2.3
    assert all(0.8 <= value <= 1.0 for value in accuracy.values())
    assert r["final_loss_gap"] == abs(loss["bf16"] - loss["no"]) / loss["no"]
    assert r["final_loss_gap"] <= params["loss_tolerance"] and r["loss_within_tolerance"] is True
    # No GPU here: the GPU part is recorded as not run, and no GPU number is invented.
    assert r["gpu_section_ran"] is False and "peak_memory_bytes" not in r and "gpu_name" not in r
    assert set(r["headline"]) <= set(r) and "activation_bytes_ratio" in r["headline"]


def printed_and_tables(course_out, record) -> tuple[str, list[str]]:
    """What the executed notebook printed (all streams, joined), and its markdown tables in order."""
    outputs = [o for c in json.loads((course_out / record.executed).read_text())["cells"]
               if c["cell_type"] == "code" for o in c["outputs"]]
    printed = "".join("".join(o.get("text", "")) for o in outputs if o["output_type"] == "stream")
    tables = ["".join(o["data"]["text/markdown"]) for o in outputs if "text/markdown" in o.get("data", {})]
    return printed, tables


@pytest.mark.notebook
def test_02_prints_each_claims_verdict_and_the_accelerator_facts(executed, course_out):
    record, r = executed(NAME)
    printed, tables = printed_and_tables(course_out, record)
    # The verdicts say they rest on a bf16 run, and the fp16 evidence comes from PyTorch's autocast alone.
    assert "evidence: a bf16 run: Accelerate's fp16 does nothing on a CPU (step 4)" in printed
    assert ("claim 'weights converted to FP16': does not hold in bfloat16: the weights stay ['torch.float32']"
            in printed)
    assert ("claim 'gradients computed in FP32': the backward matmuls (mm) ran in bfloat16; .grad is "
            "['torch.float32'] only because the weights are fp32") in printed
    assert "claim 'differs from native PyTorch AMP', in bf16: does not hold" in printed
    assert "fp16 autocast, PyTorch alone: matmuls (addmm) in float16" in printed
    # Activation bytes are the guide's reason, not its GPU-memory claim; the +44% row compares fp16 with fp16.
    assert "Its claim, 'nearly half of the GPU memory', counts all GPU memory." in printed
    assert "GPU peak memory: not measured, there is no CUDA GPU here" in printed
    assert "the +44% row: both columns are fp16" in printed
    assert "P100" not in printed
    assert "no 'finer gradient-scaling strategy' of its own" in printed
    assert ("accelerator.mixed_precision = 'bf16', accelerator.native_amp = True, accelerator.scaler = None"
            in printed)
    assert ("accelerator.mixed_precision = 'fp16', accelerator.native_amp = False, accelerator.scaler = None"
            in printed)
    assert not re.search(r"seed (article )?00\d", printed, re.I)  # learners never saw "seed articles"
    measured = tables[-1]  # "What you measured": the headline only, every value stays in results.json
    assert re.findall(r"^\| `(\w+)` \|", measured, re.M) == r["headline"]


@pytest.mark.notebook
@pytest.mark.parametrize(("name", "value", "message"), [("mixed_precision", "fp8", "'fp8'"),
                                                         ("d_model", 30, "multiple of 4")])
def test_02_bad_parameters_fail_in_the_check_cell(tmp_path, name, value, message):
    with pytest.raises(papermill.PapermillExecutionError) as info:
        papermill.execute_notebook(str(NOTEBOOK_DIR / f"{NAME}.ipynb"), str(tmp_path / "out.ipynb"),
                                   parameters={"profile": "smoke", name: value, "output_dir": str(tmp_path / "o")},
                                   kernel_name="python3", cwd=str(tmp_path), progress_bar=False)
    assert info.value.ename == "ValueError" and message in info.value.evalue
    assert not (tmp_path / "o" / "results.json").exists()
