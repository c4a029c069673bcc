"""Shared fixtures: the course's own notebook runner, and notebooks executed once per test session."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
from pathlib import Path

import pytest
from slurm_cluster import MISSING, slurm_fixture  # noqa: F401 (one scratch SLURM cluster for the session)

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
# The XLA lane's files run in .venv-xla (`make test-xla`); the main lane does not collect them.
IN_XLA_LANE = os.environ.get("FREEGPU_XLA_LANE") == "1" or importlib.util.find_spec("torch_xla") is not None
collect_ignore = [] if IN_XLA_LANE else [f"lanes/test_xla_lane{suffix}.py" for suffix in ("", "_05", "_02")]
# The image lanes' file runs whole under `make test-images` (FREEGPU_IMAGE_LANES=1), its data checks included.
if os.environ.get("FREEGPU_IMAGE_LANES") != "1":
    collect_ignore.append("lanes/test_image_lanes.py")
UNDER_SLURM = not MISSING and os.geteuid() == 0  # the scratch SLURM cluster can start here
# .ci/run sets this: in CI a skipped test fails, naming its reason (a check that could run there must run).
NO_SKIPS = os.environ.get("FREEGPU_NO_SKIPS") == "1"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if NO_SKIPS and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome, report.longrepr = "failed", f"skipped, and FREEGPU_NO_SKIPS=1 forbids it: {reason}"
    return report


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


def run_once(out: Path, folder: Path = NOTEBOOK_DIR, parameters=lambda name: {"profile": "smoke"}, *,
             solutions: bool = True, label: str = "", env=None):
    """`run(name, **extra)` executes `folder/<name>.ipynb` into `out` once per (name, extra), with the planted
    secrets and `env` in its kernel's environment and `parameters(name)` plus `extra`; returns (record, results).
    `run.out` is the folder the record's paths are relative to; `env` is a mapping, or `env(name)` gives one.
    Every executed-run fixture is one of these."""
    from build import run_course

    cache = {}

    def run(name: str, **extra):
        key = (name, tuple(sorted(extra.items())))
        if key not in cache:
            with pytest.MonkeyPatch.context() as patch:  # the kernel inherits this process's environment
                for variable, value in {**PLANTED_SECRETS, **((env(name) if callable(env) else env) or {})}.items():
                    patch.setenv(variable, value)
                record = run_course.execute(folder / f"{name}.ipynb", out, {**parameters(name), **extra},
                                            solutions=solutions)
            assert record.status == "ok", f"{label}{name} failed: {record.error}"
            cache[key] = (record, json.loads((out / record.results).read_text()))
        return cache[key]

    run.out = out
    return run


@pytest.fixture(scope="session")
def course_out(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("course")


def course_env(request):
    """`env(name)` for the session's course runs: notebook 07 runs with the scratch SLURM cluster's SLURM_CONF where
    it can start (tests/slurm_cluster.py: root, slurm-wlm, munge; started on 07's first run), so its SLURM step
    submits a real two-node job; MAIN_IP, since the scratch nodes' names do not resolve. Without a cluster, 07's
    SLURM cells say why they did not run (test_07_step2_slurm_says_it_did_not_run_without_a_controller)."""
    def env(name: str) -> dict[str, str]:
        if not (name.startswith("07") and UNDER_SLURM):
            return {}
        slurm, _ = request.getfixturevalue("slurm")
        return {"SLURM_CONF": slurm["SLURM_CONF"], "MAIN_IP": "127.0.0.1"}
    return env


@pytest.fixture(scope="session")
def executed(course_out, request):
    """`executed(name)` runs notebook `name` once (smoke profile, planted secrets) and returns its record."""
    return run_once(course_out, env=course_env(request))


@pytest.fixture(scope="module")
def notebook_run(executed, course_out, request):
    """The run of the test module's notebook (its `NAME`): record, results and output folder."""
    name = request.module.NAME
    record, results = executed(name)
    return record, results, course_out / "results" / name


@pytest.fixture(scope="session")
def executed_zh(course_out, request):
    """`executed_zh(name)`: the zh notebook of `name`, run once like `executed`; `executed_zh.out` is the folder
    its record's paths are relative to."""
    return run_once(course_out / "zh", NOTEBOOK_DIR / "zh", label="zh ", env=course_env(request))


@pytest.fixture(scope="session")
def course_site(executed, executed_zh, course_out) -> Path:
    """The course build on the session's runs (summary.json, then the site and its zh edition in site/zh/), once;
    returns the site folder."""
    from build import run_course

    runs = [executed(name)[0] for name in NOTEBOOK_NAMES]
    for name in NOTEBOOK_NAMES:  # as run_course.run_zh_lane records them: lane zh, paths under zh/
        record = executed_zh(name)[0]
        runs.append(dataclasses.replace(record, lane="zh", results=f"zh/{record.results}",
                                        executed=f"zh/{record.executed}"))
    run_course.write_summary(course_out, runs)
    run_course.build_site(course_out)
    return course_out / "site"


@pytest.fixture(scope="session")
def hub_folders(tmp_path_factory) -> dict[str, str]:
    """Offline copies of the full profile's sources in the Hub's layout (build/hub_rehearsal.py), built once."""
    from build import hub_rehearsal

    return hub_rehearsal.write_all(tmp_path_factory.mktemp("hub"))


# What each notebook's full profile reads, as parameters: the rehearsal folders stand in for the Hub ids.
def full_parameters(name: str, folders: dict[str, str]) -> dict:
    if name.startswith("05"):
        return {"profile": "full", "data_dir": folders["glue"], "model_name": folders["bert"]}
    if name[:2] in ("01", "02", "04", "06"):
        return {"profile": "full", "data_dir": folders["mnist"]}
    return {"profile": "full"}  # 00 and 03 read nothing from the Hub


@pytest.fixture(scope="session")
def executed_full(tmp_path_factory, hub_folders):
    """`executed_full(name, **extra)` runs notebook `name` once with profile="full" on the rehearsal folders;
    returns (record, results, out). The full profile rehearses the learner's path; the exercises' solutions are
    run by the smoke runs."""
    run = run_once(tmp_path_factory.mktemp("course_full"), parameters=lambda name: full_parameters(name, hub_folders),
                   solutions=False, label="full profile: ")
    return lambda name, **extra: (*run(name, **extra), run.out)
