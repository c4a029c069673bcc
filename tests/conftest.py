"""Shared fixtures: the course's own notebook runner, and notebooks executed once per test session."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = ROOT / "notebooks"
NOTEBOOK_NAMES = sorted(p.stem for p in NOTEBOOK_DIR.glob("*.ipynb"))
# Planted in the kernels' environment; no executed notebook or results file may contain these values.
PLANTED_SECRETS = {
    "HF_TOKEN": "hf_plantedSecretValue0123456789",
    "WANDB_API_KEY": "planted-wandb-key-9876543210",
    "MY_DB_PASSWORD": "planted-password-correct-horse",
}


def load_build_script(name: str):
    """Import a script from build/ (it is a folder of scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(f"build_{name}", ROOT / "build" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def course_out(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("course")


@pytest.fixture(scope="session")
def executed(course_out):
    """`executed(name)` runs notebook `name` once (smoke profile, planted secrets) and returns its record."""
    runner = load_build_script("run_course")
    cache = {}

    def run(name: str):
        if name not in cache:
            with pytest.MonkeyPatch.context() as patch:  # the kernel inherits this process's environment
                for key, value in PLANTED_SECRETS.items():
                    patch.setenv(key, value)
                record = runner.execute(NOTEBOOK_DIR / f"{name}.ipynb", course_out, {"profile": "smoke"})
            assert record.status == "ok", f"{name} failed: {record.error}"
            results = json.loads((course_out / record.results).read_text())
            cache[name] = (record, results)
        return cache[name]

    return run
