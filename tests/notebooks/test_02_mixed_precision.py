"""Notebook 02 (mixed precision): its results contract, `freegpu.precision.pick_mixed_precision`, and oracles for
what the notebook's cells teach (its own `DtypeTrace` class, Accelerate's scaler and its fp16 no-op on a CPU)."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys

import papermill
import pytest
import torch
import torch.nn.functional as F
from conftest import NOTEBOOK_DIR

from freegpu.hardware import HardwareInfo, TpuInfo, detect_hardware
from freegpu.measure import SavedTensors
from freegpu.models import build_row_transformer
from freegpu.precision import pick_mixed_precision

NAME = "02_mixed_precision"
T4 = "Tesla T4, 15360, 7.5, 550.54"
P100 = "Tesla P100-PCIE-16GB, 16384, 6.0, 550.54"
A100 = "NVIDIA A100-SXM4-40GB, 40960, 8.0, 550.54"
# torch.amp.GradScaler().state_dict() before any step: torch's defaults
TORCH_SCALER = {"scale": 65536.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2000,
                "_growth_tracker": 0}


def gpu(smi: str) -> HardwareInfo:
    return detect_hardware(environ={}, nvidia_smi=smi, topology="")


def cpu() -> HardwareInfo:
    return detect_hardware(environ={}, nvidia_smi="")


def tpu() -> HardwareInfo:
    return HardwareInfo(2, 1, 8.0, 6.0, tpu=TpuInfo("2.9.0", "TPU", "v5litepod-8", 8))


def notebook_cell(startswith: str) -> str:
    """The source of the notebook's code cell that starts with `startswith`: the cell itself, under test."""
    cells = json.loads((NOTEBOOK_DIR / f"{NAME}.ipynb").read_text())["cells"]
    found = [src for src in ("".join(c["source"]) for c in cells if c["cell_type"] == "code")
             if src.startswith(startswith)]
    assert len(found) == 1, startswith
    return found[0]


def notebook_dtype_trace():
    """The notebook's `DtypeTrace` class, run from its own cell."""
    namespace = {"torch": torch}
    exec(notebook_cell("from torch.utils._python_dispatch import TorchDispatchMode"), namespace)  # noqa: S102
    return namespace["DtypeTrace"]


def measured_mode(hw: HardwareInfo) -> tuple[str, bool]:
    """Step 1's rule, from its cell: the mixed mode measured here, and whether it runs on a TPU's host CPU."""
    rule = notebook_cell("fp16_only = ").split("rows =")[0]
    namespace = {"hw": hw}
    exec(rule, namespace)  # noqa: S102
    return namespace["mode"], namespace["on_host_cpu"]


# --- helpers, no kernel ---------------------------------------------------------------------------------------

def test_pick_mixed_precision_turns_cpu_fp16_into_no_with_a_warning():
    choice = pick_mixed_precision(cpu(), "fp16")
    assert choice == ("no", "fp16_does_nothing_on_a_cpu")
    assert pick_mixed_precision(cpu(), "bf16") == ("bf16", None)
    assert pick_mixed_precision(cpu(), "auto").mode == "no" and pick_mixed_precision(cpu(), "auto").warning is None


def test_pick_mixed_precision_on_simulated_gpus_and_tpu():
    assert pick_mixed_precision(gpu(T4), "auto").mode == "fp16"
    t4_bf16 = pick_mixed_precision(gpu(T4), "bf16")
    assert t4_bf16 == ("bf16", "bf16_without_tensor_cores")
    assert pick_mixed_precision(gpu(P100), "auto").mode == "no"
    assert pick_mixed_precision(gpu(A100), "auto").mode == "bf16"
    assert pick_mixed_precision(gpu(A100), "bf16").warning is None
    assert pick_mixed_precision(gpu(A100), "fp16") == ("fp16", None)
    tpu_fp16 = pick_mixed_precision(tpu(), "fp16")
    assert tpu_fp16 == ("no", "fp16_refused_on_a_tpu")  # fp32, as recommend says
    with pytest.raises(ValueError, match="'fp8'"):
        pick_mixed_precision(cpu(), "fp8")


def test_step_1_rule_is_the_mode_that_runs_for_real():
    assert measured_mode(cpu()) == ("bf16", False)
    assert measured_mode(gpu(T4)) == ("fp16", False)
    assert measured_mode(gpu(f"{T4}\n{T4}"))[0] == "fp16"  # Kaggle's GPU T4 x2
    assert measured_mode(gpu(A100)) == ("bf16", False)
    assert measured_mode(gpu(f"{A100}\n{T4}"))[0] == "fp16"  # the weakest GPU decides
    assert measured_mode(tpu()) == ("bf16", True)  # a TPU: the host CPU runs this notebook


def test_step_1_turns_torch_xla_off_before_accelerate_is_imported():
    """On a TPU, `cpu=True` means XLA unless USE_TORCH_XLA=0 is set before the first `import accelerate` (the XLA
    lane runs the notebook where torch_xla imports: tests/lanes/test_xla_lane_02.py). No Accelerator asks for cpu=True
    to leave a TPU any more."""
    cells = [("".join(c["source"])) for c in json.loads((NOTEBOOK_DIR / f"{NAME}.ipynb").read_text())["cells"]
             if c["cell_type"] == "code"]
    flag = next(i for i, src in enumerate(cells) if 'os.environ["USE_TORCH_XLA"] = "0"' in src)
    first = next(i for i, src in enumerate(cells) if re.search(r"^(from|import) accelerate", src, re.M))
    assert flag < first or (flag == first and cells[flag].index("USE_TORCH_XLA") < cells[flag].index("accelerate"))
    assert "Accelerator(mixed_precision=mode)" in notebook_cell("from accelerate import Accelerator")
    assert not any(re.search(r"Accelerator\([^)]*cpu=on_host_cpu", src) for src in cells)


def test_a_real_cpu_fp16_accelerator_is_a_noop():
    """In a fresh process: Accelerate keeps one configuration per process."""
    code = ("import json; from accelerate import Accelerator; a = Accelerator(mixed_precision='fp16', cpu=True); "
            "print(json.dumps([a.mixed_precision, a.native_amp, a.scaler is None]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert json.loads(done.stdout.strip().splitlines()[-1]) == ["fp16", False, True]


def test_a_fused_adamw_skip_is_unseen_by_accelerate():
    """Step 3's caveat (issue 26): with `AdamW(fused=True)` GradScaler lets the fused kernel skip an inf step, so
    Accelerate's `step_was_skipped` stays False; a for-loop AdamW's skip is reported. Weights are safe either way."""
    code = ("import json, torch; from accelerate import Accelerator; "
            "from accelerate.optimizer import AcceleratedOptimizer; Accelerator(cpu=True); seen = {}\n"
            "for fused in (False, True):\n"
            "    w, scaler = torch.nn.Parameter(torch.ones(4)), torch.amp.GradScaler('cpu')\n"
            "    opt = AcceleratedOptimizer(torch.optim.AdamW([w], lr=0.1, fused=fused), scaler=scaler)\n"
            "    scaler.scale(torch.ones(()))\n"  # the scale exists, as after scaler.scale(loss)
            "    w.grad = torch.full((4,), float('inf'))\n"
            "    opt.step()\n"
            "    kept = torch.equal(w.detach(), torch.ones(4))\n"
            "    seen[str(fused)] = [opt.step_was_skipped, kept, scaler.get_scale()]\n"
            "print(json.dumps(seen))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {"False": [True, True, 32768.0], "True": [False, True, 32768.0]}


def test_accelerates_scaler_is_torchs_with_its_defaults():
    from accelerate.utils import get_grad_scaler

    assert type(get_grad_scaler()) is torch.amp.GradScaler
    assert get_grad_scaler().state_dict() == torch.amp.GradScaler("cpu").state_dict() == TORCH_SCALER
    custom = torch.amp.GradScaler("cpu", init_scale=8.0, growth_interval=3).state_dict()
    assert custom["scale"] == 8.0 and custom["growth_interval"] == 3


def test_the_notebooks_dtype_trace_sees_what_autocast_runs():
    DtypeTrace = notebook_dtype_trace()
    layer = torch.nn.Linear(8, 4)
    x = torch.randn(5, 8)
    with DtypeTrace() as fp32:
        layer(x).sum().backward()
    assert {dtype for _, dtype in fp32.records} == {"float32"} and [op for op, _ in fp32.records].count("addmm") == 1
    with DtypeTrace() as forward, torch.autocast("cpu", dtype=torch.bfloat16):
        y = layer(x)
    ops = dict(forward.records)
    assert ops["addmm"] == "bfloat16" and y.dtype == torch.bfloat16
    casts = [op for op, _ in forward.records if op == "_to_copy(float32->bfloat16)"]
    assert len(casts) == 3  # weight, bias and input: temporary copies
    assert layer.weight.dtype == torch.float32
    with DtypeTrace() as backward:
        y.float().sum().backward()
    assert dict(backward.records)["mm"] == "bfloat16" and layer.weight.grad.dtype == torch.float32
    with DtypeTrace() as fp16, torch.autocast("cpu", dtype=torch.float16):  # fp16 autocast runs on a CPU too
        F.cross_entropy(layer(x), torch.tensor([0, 1, 2, 3, 0]))
    assert dict(fp16.records)["addmm"] == "float16" and dict(fp16.records)["nll_loss_forward"] == "float32"


def test_loss_scaling_oracle():
    """Step 3 in small: a gradient below fp16's smallest number vanishes, and a scaled loss brings it back."""
    torch.manual_seed(0)
    layer, x = torch.nn.Linear(16, 16), torch.randn(4096, 16)

    def weight_grad(scale, dtype=torch.float16):
        layer.zero_grad()
        with torch.autocast("cpu", dtype=dtype, enabled=dtype is not None):
            y = layer(x)
        (y.float().mean() * 1e-3 * scale).backward()
        return layer.weight.grad / scale

    reference, lost, rescued = weight_grad(1.0, None), weight_grad(1.0), weight_grad(65536.0)
    assert (lost == 0).all() and (reference != 0).all()
    assert ((rescued - reference).abs().max() / reference.abs().max()).item() < 1e-2


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
def test_02_step_1_formats_and_the_mode_measured(notebook_run):
    _, r, _ = notebook_run
    assert "load_digits" in r["data_source"] and r["measured_on"] == "cpu" and r["model_width"] == 64
    assert r["measured_mode"] == "bf16"
    assert r["measured_on_host_cpu"] is False  # True only on a TPU (see test_step_1_rule_...)
    facts = r["format_facts"]
    assert facts["fp16"]["max"] == 65504.0 and facts["bf16"]["max"] > 3e38 and facts["fp32"]["max"] > 3e38
    assert facts["fp16"]["eps"] == 2**-10 and facts["bf16"]["eps"] == 2**-7 and facts["fp32"]["eps"] == 2**-23
    assert facts["fp16"]["smallest_normal"] == 2**-14
    assert facts["bf16"]["smallest_normal"] == facts["fp32"]["smallest_normal"]  # fp32's exponent range
    assert facts["fp16"]["stores"] == {"70000.0": "inf", "1e-08": "0", "1.001": "1.00098"}
    assert facts["bf16"]["stores"]["1.001"] == "1" and math.isclose(float(facts["bf16"]["stores"]["70000.0"]), 7e4,
                                                                     rel_tol=0.01)
    assert math.isclose(float(facts["bf16"]["stores"]["1e-08"]), 1e-8, rel_tol=0.01)
    assert facts["fp32"]["stores"] == {"70000.0": "70000", "1e-08": "1e-08", "1.001": "1.001"}


@pytest.mark.notebook
def test_02_step_2_one_traced_step_is_native_amp(notebook_run):
    _, r, _ = notebook_run
    # Matrix multiplications in bf16, the loss in fp32, weights, gradients and optimizer state in fp32.
    ops = r["autocast_op_dtypes"]
    assert ops["addmm"] == ops["mm"] == "bfloat16"
    assert any("scaled_dot_product" in op and dtype == "bfloat16" for op, dtype in ops.items())
    assert ops["_log_softmax"] == ops["nll_loss_forward"] == "float32"
    assert "_to_copy(float32->bfloat16)" in ops and "_to_copy(bfloat16->float32)" in ops
    assert r["backward_op_dtypes"]["mm"] == "bfloat16" and r["backward_op_dtypes"]["nll_loss_backward"] == "float32"
    assert r["param_dtype_during_autocast"] == r["grad_dtype"] == r["optimizer_state_dtype"] == ["torch.float32"]
    assert r["model_output_dtype"] == "torch.float32"  # convert_outputs_to_fp32
    assert r["accelerator_effect"] == {"mixed_precision": "bf16", "native_amp": True}
    assert r["accelerate_same_ops"] is r["accelerate_same_logits"] is r["accelerate_is_native_amp"] is True


@pytest.mark.notebook
def test_02_step_3_loss_scaling_live_on_the_cpu(notebook_run):
    _, r, _ = notebook_run
    assert r["fp16_underflow_without_scaling"] is True and r["fp16_survives_with_scaling"] is True
    assert 0 <= r["fp16_rescued_relative_error"] < 1e-2
    assert r["accelerate_scaler"] == TORCH_SCALER and r["accelerate_scaler_is_torch_default"] is True


@pytest.mark.notebook
def test_02_step_3_grad_scaler_walk_follows_the_rules(notebook_run):
    _, r, _ = notebook_run
    walk, interval = r["scaler_walk"], r["scaler_growth_interval"]
    assert interval == r["parameters"]["scaler_growth_interval"] == 2
    assert [w["step"] for w in walk] == list(range(8)) and walk[0]["scale"] == 65536.0
    assert r["scaler_scales"] == [w["scale"] for w in walk] + [walk[-1]["next_scale"]]
    skipped = [w["step"] for w in walk if w["skipped"]]
    outlier = r["scaler_outlier_step"]
    assert outlier == 5 and outlier in skipped and walk[outlier]["loss"] in ("nan", "inf")
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
def test_02_step_4_traps_and_recommendations(notebook_run):
    _, r, _ = notebook_run
    assert r["cpu_fp16_effect"] == {"mixed_precision": "fp16", "native_amp": False}
    assert r["cpu_fp16_op_dtypes"] == ["float32"] and r["cpu_fp16_is_noop"] is True
    assert r["requested_mixed_precision"] == "auto" and r["recommended_mixed_precision"] == "no"
    assert r["recommendation_warning"] is None
    assert r["simulated_choices"] == {  # the GPUs Colab and Kaggle hand out today (Kaggle's P100 is retired)
        "Colab T4": {"auto": "fp16", "bf16_warns": True},
        "Kaggle GPU T4 x2": {"auto": "fp16", "bf16_warns": True},
        "Colab Pro L4": {"auto": "bf16", "bf16_warns": False},
        "Colab Pro A100": {"auto": "bf16", "bf16_warns": False},
    }


@pytest.mark.notebook
def test_02_step_5_saved_activation_bytes(notebook_run):
    _, r, _ = notebook_run
    params = r["parameters"]
    assert params["profile"] == "smoke" and params["mixed_precision"] == "auto" and params["d_model"] == 0
    saved = r["activation_bytes"]
    assert set(saved) == {"no", "bf16", "fp16"} and saved["bf16"] > 0
    assert r["activation_bytes_ratio"] == saved["bf16"] / saved["no"]
    assert 0.4 < r["activation_bytes_ratio"] <= 0.7  # a transformer block, not only an MLP
    assert 0.4 < saved["fp16"] / saved["no"] <= 0.7  # PyTorch's fp16 autocast: 2 bytes, like bf16
    by_dtype = r["activation_bytes_by_dtype"]
    assert by_dtype["fp16"].get("float16", 0) > 0 and by_dtype["bf16"].get("float32", 0) > 0  # some stay fp32
    assert all(sum(by_dtype[p].values()) == saved[p] for p in saved)
    # Cut in issue 24: step times, final losses, GPU peak memory; no such number is recorded.
    assert not {"step_time_ratio", "final_loss", "peak_memory_bytes", "gpu_name"} & set(r)
    assert set(r["headline"]) <= set(r) and "activation_bytes_ratio" in r["headline"]


def printed_and_tables(course_out, record) -> tuple[str, list[str]]:
    """What the executed notebook printed (all streams, joined), and its markdown tables in order."""
    outputs = [o for c in json.loads((course_out / record.executed).read_text())["cells"]
               if c["cell_type"] == "code" for o in c["outputs"]]
    printed = "".join("".join(o.get("text", "")) for o in outputs if o["output_type"] == "stream")
    tables = ["".join(o["data"]["text/markdown"]) for o in outputs if "text/markdown" in o.get("data", {})]
    return printed, tables


@pytest.mark.notebook
def test_02_prints_each_claims_verdict_and_the_accelerator_facts(notebook_run, course_out):
    record, r, _ = notebook_run
    printed, tables = printed_and_tables(course_out, record)
    # Each verdict names the mode it was measured in (bf16 on a CPU), beside the numbers it rests on.
    assert "claim 'weights converted to FP16', in bf16: the weights stay ['torch.float32']" in printed
    assert "claim 'gradients computed in FP32': backward mm in bfloat16; .grad ['torch.float32']" in printed
    assert ("claim 'differs from native PyTorch AMP', in bf16: same operations in the same dtypes: True; "
            "identical logits: True") in printed
    assert "fp16, no scaling: every output and weight gradient is zero: True" in printed
    assert "Accelerate's scaler is torch's GradScaler, with torch's defaults: True" in printed
    assert "P100" not in printed
    assert "{'mixed_precision': 'bf16', 'native_amp': True}\nmodel output torch.float32" in printed
    assert "{'mixed_precision': 'fp16', 'native_amp': False}" in printed
    assert "a silent no-op: True" in printed
    assert "bf16/fp32 = 0.5" in printed  # the activation bytes the guide's claim rests on
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
