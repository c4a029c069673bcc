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
    "KAGGLE_KEY": "0123planted4567kaggle89abcdef",
    "KAGGLE_USERNAME": "planted-kaggle-user",
    "HF_SIGNING_KEY": "planted-signing-value-1357",
    "KAGGLE_CREDS": "planted-kaggle-creds-2468",
    "DATABASE_URL": "postgresql://admin:planted-url-password-4242@db.invalid:5432/app",
    "ACME_SETTINGS": "planted-matches-no-pattern-9090",  # a name that says nothing
}
# What must never appear: each value, and the password inside a URL on its own.
PLANTED_NEEDLES = [*PLANTED_SECRETS.values(), "planted-url-password-4242"]


def planted_hits(*roots: Path) -> list[str]:
    """`path: <first characters of the value>` for every file under `roots` holding a planted value (any file)."""
    hits = []
    for root in roots:
        for path in [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file()):
            data = path.read_bytes()
            hits += [f"{path}: {needle[:12]}..." for needle in PLANTED_NEEDLES if needle.encode() in data]
    return hits


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


@pytest.fixture(scope="session")
def course_site(executed, course_out) -> Path:
    """The course build on the session's runs (summary.json, then the site), once; returns the site folder."""
    runs = [executed(name)[0] for name in NOTEBOOK_NAMES]
    runner = load_build_script("run_course")
    runner.write_summary(course_out, runs)
    runner.build_site(course_out)
    return course_out / "site"
