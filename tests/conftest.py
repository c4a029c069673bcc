"""Shared fixtures: the course's own notebook runner, and notebooks executed once per test session."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
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


# Notebook runs the collected tests will read start ahead of them, AHEAD at a time, each in a child process of its
# own (so each has its own environment): on 2 cores the runs leave a core idle much of the time (launch rendezvous,
# timeouts, kills). The tests read their results as today; a run not started yet when a test needs it runs there.
AHEAD = int(os.environ.get("FREEGPU_RUNS_AHEAD", "2"))
AHEAD_PIDS: set[int] = set()  # the children running notebooks ahead (own_children leaves their trees out)
_CHILD = """import dataclasses, json, sys
from pathlib import Path
from build import run_course
run = run_course.execute(Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3]), solutions=sys.argv[4] == "1")
print("RECORD " + json.dumps(dataclasses.asdict(run)))
"""


def _execute_in_child(notebook: Path, out: Path, parameters: dict, solutions: bool, env: dict):
    """run_course.execute in a child process with exactly `env`; returns its NotebookRun."""
    from build.run_course import NotebookRun

    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(notebook), str(out), json.dumps(parameters),
                              "1" if solutions else "0"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    AHEAD_PIDS.add(child.pid)
    try:
        stdout, stderr = child.communicate()
    finally:
        AHEAD_PIDS.discard(child.pid)
    records = [line[len("RECORD "):] for line in stdout.splitlines() if line.startswith("RECORD ")]
    if not records:
        return NotebookRun(notebook.stem, "failed", 0.0, 0.0, None,
                           f"its child process exited with status {child.returncode}: {stderr[-2000:]}")
    return NotebookRun(**json.loads(records[-1]))


def own_children(process=None) -> list:
    """psutil's children(recursive=True) of `process` (this one), without the notebook runs started ahead."""
    import psutil

    process = process or psutil.Process()
    ahead = set()
    for pid in list(AHEAD_PIDS):
        try:
            ahead |= {pid, *(p.pid for p in psutil.Process(pid).children(recursive=True))}
        except psutil.Error:
            pass
    return [p for p in process.children(recursive=True) if p.pid not in ahead]


def run_once(out: Path, folder: Path = NOTEBOOK_DIR, parameters=lambda name: {"profile": "smoke"}, *,
             solutions: bool = True, label: str = "", env=None):
    """`run(name, **extra)` executes `folder/<name>.ipynb` into `out` once per (name, extra), with the planted
    secrets and `env` in its kernel's environment and `parameters(name)` plus `extra`; returns (record, results).
    `run.out` is the folder the record's paths are relative to; `env` is a mapping, or `env(name)` gives one.
    `run.ahead(pool, name, **extra)` starts that run in `pool` now, in a child process; `run(name, **extra)` then
    waits for it. Every executed-run fixture is one of these."""
    from build import run_course

    cache, started = {}, {}

    def variables(name: str) -> dict[str, str]:
        return {**PLANTED_SECRETS, **((env(name) if callable(env) else env) or {})}

    def run(name: str, **extra):
        key = (name, tuple(sorted(extra.items())))
        if key not in cache:
            future = started.pop(key, None)
            if future is not None and not future.cancel():  # running or done: wait for it
                record = future.result()
            else:
                with pytest.MonkeyPatch.context() as patch:  # the kernel inherits this process's environment
                    for variable, value in variables(name).items():
                        patch.setenv(variable, value)
                    record = run_course.execute(folder / f"{name}.ipynb", out, {**parameters(name), **extra},
                                                solutions=solutions)
            assert record.status == "ok", f"{label}{name} failed: {record.error}"
            cache[key] = (record, json.loads((out / record.results).read_text()))
        return cache[key]

    def ahead(pool: ThreadPoolExecutor, name: str, **extra) -> None:
        key = (name, tuple(sorted(extra.items())))
        if key not in cache and key not in started:
            started[key] = pool.submit(_execute_in_child, folder / f"{name}.ipynb", out,
                                       {**parameters(name), **extra}, solutions, {**os.environ, **variables(name)})

    run.out, run.ahead = out, ahead
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

    def full(name: str, **extra):
        return (*run(name, **extra), run.out)

    full.ahead = run.ahead
    return full


# What each collected test reads of the session's runs, in the order of first need: (fixture, name, extra).
PLANNED = pytest.StashKey[list]()


def _runs_read_by(item) -> list[tuple[str, str, dict]]:
    fixtures = set(item.fixturenames)
    name = item.callspec.params.get("name") if hasattr(item, "callspec") else None
    runs = []
    if "course_site" in fixtures:
        runs += [(fixture, n, {}) for fixture in ("executed", "executed_zh") for n in NOTEBOOK_NAMES]
    if "notebook_run" in fixtures:
        runs.append(("executed", item.module.NAME, {}))
    if name in NOTEBOOK_NAMES:
        runs += [(fixture, name, {}) for fixture in ("executed", "executed_zh") if fixture in fixtures]
        if "executed_full" in fixtures:
            runs.append(("executed_full", name, getattr(item.module, "EXTRA", {}).get(name, {})))
    return runs


def pytest_collection_finish(session):
    planned = []
    for item in session.items:
        planned += [run for run in _runs_read_by(item) if run not in planned]
    session.config.stash[PLANNED] = planned


@pytest.fixture(scope="session", autouse=True)
def runs_ahead(request):
    """Starts every run that PLANNED lists, AHEAD at a time (FREEGPU_RUNS_AHEAD=0: none; each runs when first
    read); at the end, stops what is still running."""
    import psutil

    planned = request.config.stash.get(PLANNED, [])
    if AHEAD < 1 or not planned:
        yield
        return
    pool = ThreadPoolExecutor(AHEAD, thread_name_prefix="notebook-ahead")
    for fixture, name, extra in planned:
        try:
            request.getfixturevalue(fixture).ahead(pool, name, **extra)
        except (Exception, pytest.skip.Exception):  # e.g. no SLURM for 07: the test that reads it says why
            pass
    yield
    pool.shutdown(wait=False, cancel_futures=True)
    for pid in list(AHEAD_PIDS):
        try:
            parent = psutil.Process(pid)
            for process in [*parent.children(recursive=True), parent]:
                process.kill()
        except psutil.Error:
            pass
