"""Software facts for a bug report: environment signals (secrets hidden), `accelerate env`, an Accelerate config.

Introduced in notebook 00 (environment check).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

__all__ = [
    "environment_signals",
    "accelerate_env_report",
    "write_accelerate_config",
]

REDACTED = "<redacted>"
_SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW|API_?KEY|ACCESS_?KEY|PRIVATE|CREDENTIAL|AUTH|COOKIE", re.I)
# Variables that tell platform, accelerator and library behaviour apart.
_SIGNAL_PREFIXES = ("COLAB_", "KAGGLE_", "PJRT_", "TPU_", "XLA_", "CUDA_", "NVIDIA_", "HF_", "ACCELERATE_",
                    "TRANSFORMERS_", "PYTORCH_", "OMP_", "MKL_", "JPY_SESSION_NAME", "VERTEX_PRODUCT")


def is_secret_name(name: str) -> bool:
    """Whether an environment variable's name says it holds a credential (token, key, password...)."""
    return bool(_SECRET_NAME.search(name))


def environment_signals(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The platform-relevant environment variables, with every secret-looking value replaced (notebook 00)."""
    env = os.environ if environ is None else environ
    return {name: REDACTED if is_secret_name(name) else value
            for name, value in sorted(env.items()) if name.startswith(_SIGNAL_PREFIXES)}


def redact(text: str, environ: dict[str, str] | None = None) -> str:
    """`text` with the value of every secret-looking environment variable replaced by `<redacted>`."""
    env = os.environ if environ is None else environ
    for name, value in env.items():
        if is_secret_name(name) and len(value) >= 4:
            text = text.replace(value, REDACTED)
    return text


def accelerate_env_report(timeout: float = 120.0) -> str:
    """The output of the `accelerate env` command (a CLI, not a module), with secrets redacted (notebook 00).

    It runs in a child process, so whatever it initialises (CUDA included) stays out of the notebook's process.
    """
    cli = [sys.executable, "-m", "accelerate.commands.accelerate_cli", "env"]
    # Put this interpreter's bin folder first, so the report finds the `accelerate` command of this environment.
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    done = subprocess.run(cli, capture_output=True, text=True, timeout=timeout, env={**os.environ, "PATH": path})
    if done.returncode != 0:
        raise RuntimeError(f"`accelerate env` failed ({done.returncode}):\n{redact(done.stderr)}")
    return redact(done.stdout)


def write_accelerate_config(output_dir: Path, mixed_precision: str) -> Path:
    """Write an Accelerate config for this machine with `write_basic_config` into `output_dir` (notebook 00).

    `write_basic_config` refuses to overwrite and defaults to the user's own config file, so we give it a fresh
    temporary name inside `output_dir`, then rename it over our previous copy: the user's
    `~/.cache/huggingface/accelerate/default_config.yaml` is never touched. The file is JSON, which Accelerate
    reads by its `.json` suffix.
    """
    from accelerate.utils import write_basic_config

    target = Path(output_dir) / "accelerate_config.json"
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp.json")
    tmp.unlink(missing_ok=True)
    write_basic_config(mixed_precision=mixed_precision, save_location=str(tmp))
    os.replace(tmp, target)
    return target
