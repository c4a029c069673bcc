"""Secret redaction: what a notebook prints about the environment shows no credential.

Introduced in notebook 00 (environment check); `freegpu.launch` redacts a failed launch's output with `redact`.
Values are shown only for the names in `SHOWN_NAMES`, which are known to be harmless.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "REDACTED",
    "environment_signals",
    "redact",
]

# Plain text, so it survives markdown and HTML alike (`<redacted>` would become an empty tag on a web page).
REDACTED = "[redacted]"
# The only variables whose values are ever shown: platform, device, thread and library settings, no credentials.
SHOWN_NAMES = frozenset({
    "ACCELERATE_DEBUG_MODE", "ACCELERATE_DOWNCAST_BF16", "ACCELERATE_DYNAMO_BACKEND",
    "ACCELERATE_GRADIENT_ACCUMULATION_STEPS", "ACCELERATE_LOG_LEVEL", "ACCELERATE_MIXED_PRECISION",
    "ACCELERATE_TORCH_DEVICE", "ACCELERATE_USE_CPU", "ACCELERATE_USE_DEEPSPEED", "ACCELERATE_USE_FSDP",
    "COLAB_GPU", "COLAB_RELEASE_TAG", "CUDA_DEVICE_ORDER", "CUDA_VERSION", "CUDA_VISIBLE_DEVICES",
    "HF_DATASETS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY", "HF_HUB_OFFLINE", "KAGGLE_KERNEL_RUN_TYPE",
    "MKL_NUM_THREADS", "NVIDIA_DRIVER_CAPABILITIES", "NVIDIA_VISIBLE_DEVICES", "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS", "PJRT_DEVICE", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_NVML_BASED_CUDA_CHECK",
    "TOKENIZERS_PARALLELISM", "TPU_ACCELERATOR_TYPE", "TPU_NAME", "TPU_PROCESS_ADDRESSES", "TPU_WORKER_ID",
    "TRANSFORMERS_OFFLINE", "XLA_DOWNCAST_BF16", "XLA_USE_BF16",
})
# Variables that tell platform, accelerator and library behaviour apart: listed by name, values only if shown.
_SIGNAL_PREFIXES = ("COLAB_", "KAGGLE_", "PJRT_", "TPU_", "XLA_", "CUDA_", "NVIDIA_", "HF_", "ACCELERATE_",
                    "TRANSFORMERS_", "PYTORCH_", "OMP_", "MKL_", "WANDB_", "JPY_SESSION_NAME", "VERTEX_PRODUCT")
_SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW|KEY|PRIVATE|CRED|AUTH|COOKIE|SESSION|SIGN", re.I)
# Standard variables whose values are paths or locale settings, not secrets: left in text as they are.
_PLAIN_NAMES = frozenset({"HOME", "PATH", "PWD", "OLDPWD", "SHELL", "USER", "LOGNAME", "LANG", "TERM", "TMPDIR",
                          "HOSTNAME", "VIRTUAL_ENV", "PYTHONPATH", "SHLVL", "_"})
_VERSION = re.compile(r"[0-9][0-9.]*")  # PYTHON_VERSION=3.12.3: hiding it would hide the versions in a report
_MIN_VALUE_LENGTH = 6  # shorter values ("1", "true", "cpu") would blank out ordinary words in the text
_URL_CREDENTIALS = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)[^/\s@]+@", re.I)
_TOKEN_SHAPES = re.compile(r"\bhf_[A-Za-z0-9]{20,}\b|\b(?:ghp|gho|github_pat)_[A-Za-z0-9_]{20,}\b")


def is_secret_name(name: str) -> bool:
    """Whether an environment variable's name says it holds a credential (token, key, password...)."""
    return bool(_SECRET_NAME.search(name))


def _is_relevant(name: str) -> bool:
    return name.startswith(_SIGNAL_PREFIXES) or name in SHOWN_NAMES or is_secret_name(name)


def environment_signals(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The platform-relevant environment variables: values for `SHOWN_NAMES`, `REDACTED` for all others."""
    env = os.environ if environ is None else environ
    return {name: value if name in SHOWN_NAMES else REDACTED
            for name, value in sorted(env.items()) if _is_relevant(name)}


def _stored_secrets() -> list[str]:
    """Credentials kept in files: the Hugging Face token file and the key in Kaggle's `kaggle.json`."""
    hf_home = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface"))
    found = []
    for path in {Path(os.environ.get("HF_TOKEN_PATH", hf_home / "token")), hf_home / "token"}:
        try:
            found.append(path.read_text().strip())
        except OSError:
            pass
    kaggle = Path(os.environ.get("KAGGLE_CONFIG_DIR", Path.home() / ".kaggle")) / "kaggle.json"
    try:
        found.append(str(json.loads(kaggle.read_text()).get("key", "")))
    except (OSError, ValueError, AttributeError):
        pass
    return found


def redact(text: str, environ: Mapping[str, str] | None = None) -> str:
    """`text` with every value that may be a secret replaced by `REDACTED` (notebook 00).

    Replaced: environment values outside `SHOWN_NAMES` and the plain POSIX names (secret-looking names always,
    others from 6 characters and not a version), stored HF/Kaggle credentials, URL `user:password@`, token shapes.
    """
    env = os.environ if environ is None else environ
    values = [value for name, value in env.items() if is_secret_name(name) or (
              name not in SHOWN_NAMES and name not in _PLAIN_NAMES and len(value) >= _MIN_VALUE_LENGTH
              and not _VERSION.fullmatch(value))]
    for value in sorted({*values, *(s for s in _stored_secrets() if len(s) >= 4)}, key=len, reverse=True):
        text = text.replace(value, REDACTED)
    text = _URL_CREDENTIALS.sub(lambda m: f"{m['scheme']}{REDACTED}@", text)
    return _TOKEN_SHAPES.sub(REDACTED, text)
