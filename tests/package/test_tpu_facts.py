"""TPU-only and GPU-only facts that notebooks 01, 02 and 04 state, pinned to the installed Accelerate's source
(issue 26).

This machine has neither a TPU nor a GPU, so these tests read the lines of `accelerate` that decide each fact: an
upgrade that changes one fails here, and the notebook's sentence must be checked again. The XLA lane
(tests/lanes/test_xla_lane_02.py) drives the same code paths for real on XLA's CPU backend, with the TPU check patched.
"""

from __future__ import annotations

import inspect
import re

import accelerate
from accelerate import accelerator as accelerator_module
from accelerate import launchers, state
from accelerate.utils import dataclasses as acc_dataclasses
from accelerate.utils import imports


def _source(obj) -> str:
    return inspect.getsource(obj)


def test_accelerate_version_the_facts_were_read_from():
    assert accelerate.__version__ == "1.16.0", "re-read the facts below against the new source, then update"


def test_with_torch_xla_importable_accelerate_picks_xla_before_it_reads_cpu():
    """02 step 1, 01 step 3, 04 step 5: on a TPU, `Accelerator(cpu=True)` is an XLA one (state.py,
    `_prepare_backend`)."""
    body = _source(state.PartialState._prepare_backend)
    xla, cpu_read = body.index("elif is_torch_xla_available():"), body.index("not cpu")
    assert xla < cpu_read, "XLA is no longer chosen before `cpu` is read: 02's step 1 paragraph may be moot"
    assert 'backend = "xla"' in body[xla:cpu_read] and "DistributedType.XLA" in body[xla:cpu_read]


def test_use_torch_xla_0_before_the_import_keeps_torch_xla_out():
    """02 step 1: `USE_TORCH_XLA=0` is read once, at import, and gates every `is_torch_xla_available()`."""
    text = _source(imports)
    assert 'USE_TORCH_XLA = parse_flag_from_env("USE_TORCH_XLA", default=True)' in text
    gate = text[text.index("if USE_TORCH_XLA:"):]
    assert "import torch_xla" in gate.split("_tpu_available")[0] and "_torch_xla_available = True" in gate
    check = _source(imports.is_torch_xla_available)
    assert "if not _torch_xla_available:\n        return False" in check


def test_fp16_is_refused_on_a_tpu_only():
    """02 step 4 (and 04 step 5) on a TPU without USE_TORCH_XLA=0 would raise: fp16 is refused on a TPU's XLA
    device."""
    init = _source(accelerator_module.Accelerator.__init__)
    start, end = init.index('self.state.mixed_precision == "fp16"'), init.index('self.state.mixed_precision == "bf16"')
    refusal = init[start:end]
    assert "is_torch_xla_available(check_is_tpu=True)" in refusal
    assert 'raise ValueError(f"fp16 mixed precision is not supported on {self.device.type!r}.")' in refusal
    assert 'self.device.type != "cpu"' in refusal  # on a CPU, fp16 is accepted and ignored (02 step 4)


def test_tpu_bf16_stores_everything_in_bf16():
    """02's recap: a TPU's bf16 is `XLA_USE_BF16=1` (no autocast, 16-bit weights), not native AMP."""
    init = _source(state.AcceleratorState.__init__)
    tpu = init[init.index("is_torch_xla_available(check_is_tpu=True)"):]
    assert 'os.environ["XLA_USE_BF16"] = str(1)' in tpu.split("elif")[0]


def test_fsdp_mixed_precision_casts_weights_and_reduces_in_16_bits():
    """02's recap (GPU-only): under FSDP, `mixed_precision` sets param_dtype and reduce_dtype to the 16-bit type."""
    text = _source(acc_dataclasses.FullyShardedDataParallelPlugin)
    assert 'dtype_args = {"param_dtype": dtype, "reduce_dtype": dtype}' in text


def test_gloo_for_cpu_processes_also_with_accelerate_use_cpu():
    """01 step 4: CPU processes join with gloo when told cpu=True, or when ACCELERATE_USE_CPU is set."""
    init = _source(state.AcceleratorState.__init__)
    assert re.search(r'if parse_flag_from_env\("ACCELERATE_USE_CPU"\):\s+cpu = True', init)
    backend = _source(state.PartialState._prepare_backend)
    assert 'backend = "gloo"' in backend and "DistributedType.MULTI_CPU" in backend


def test_notebook_launcher_takes_its_tpu_branch_on_colab_or_kaggle_with_tpu_variables():
    """01 exercise 4 prints these conditions and 04 step 5 and recap state them: the TPU branch needs Colab or
    Kaggle and TPU_NAME or PJRT_DEVICE=TPU."""
    body = _source(launchers.notebook_launcher)
    assert 'os.environ.get("TPU_NAME", None) is not None' in body
    assert 'os.environ.get("PJRT_DEVICE", "") == "TPU"' in body
    assert 'elif in_colab and (not torch.cuda.is_available() or get_gpu_info()[1] < 2):' in body


def test_notebook_launcher_refuses_on_a_tpu_when_an_accelerator_exists():
    """04 exercise 4 (restart the kernel first) and recap (an Accelerator created only inside the function): the TPU
    branch raises when the kernel already holds an Accelerator, then forks with xmp.spawn. The XLA lane
    (tests/lanes/test_xla_lane.py) drives both refusals for real."""
    body = _source(launchers.notebook_launcher)
    tpu = body[body.index("# TPU launch"):body.index("elif in_colab and")]
    assert "if len(AcceleratorState._shared_state) > 0:" in tpu and "Restart your notebook" in tpu
    assert tpu.index("_shared_state") < tpu.index('xmp.spawn(launcher, args=args, start_method="fork")')


def test_deepspeed_mixed_precision_is_deepspeeds_own_engine():
    """02's recap (GPU-only): under DeepSpeed, Accelerate's own autocast is off ('no') and `mixed_precision` turns
    on DeepSpeed's fp16/bf16 engine (16-bit weights, fp32 master copies in its optimizer), not native AMP."""
    plugin = _source(acc_dataclasses.DeepSpeedPlugin.set_mixed_precision)
    assert 'ds_config["fp16"] = {"enabled": True, "auto_cast": True}' in plugin
    init = _source(state.AcceleratorState.__init__)
    assert re.search(r'DistributedType\.DEEPSPEED and mixed_precision != "fp8":\s+self\._mixed_precision = "no"', init)
