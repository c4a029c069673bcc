"""Run the whole course headless and build its site: `make course` calls this.

Executes every notebook in notebooks/ with papermill (profile `auto`: `smoke` on a CPU-only machine) and writes
build/out/:

    executed/<name>.ipynb    the notebooks with their outputs
    results/<name>/          each notebook's output_dir (results.json, plots, checkpoints...)
    xla/                     the XLA lane (notebook 04 executed again in .venv-xla): executed/, results/
    zh/                      the zh lane: notebooks/zh/*.ipynb (the Chinese edition) executed: executed/, results/
    starters/                the starters (starters/*.ipynb), executed where `freegpu` cannot be imported
    summary.json             {"built_at", "machine", "notebooks": [{"name", "lane", "status", "wall_s", "budget_s",
                             "peak_rss_mb", "results", "executed", "error"}], "site": {"build_s"}}
    site/                    the course site, built by build/course_site.py from the above (never re-executed)

With --xla-python PATH (the Makefile passes .venv-xla's python unless NO_XLA=1), the notebooks in XLA_LANE run a
second time in that environment with PJRT_DEVICE=CPU, so their TPU half runs on XLA's CPU backend.
A notebook with worked solutions (notebooks/solutions/<name>.py, see build/solutions.py) runs them in its kernel,
each under its exercise: its executed notebook holds them, the site shows them collapsed.
A notebook that fails does not stop the others; the command exits 1 at the end and names it.
The tests use `execute` from here too, so the course and the tests run notebooks the same way.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import functools
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
STARTERS = ROOT / "starters"
OUT = ROOT / "build" / "out"
CELL_TIMEOUT_S = 900
# Wall-time budgets of the smoke profile with its exercises' solutions on a 2-core machine, by notebook number
# (08's five solution runs of its training script take 30 s of its 54): benchmarks recorded in
# summary.json and shown on the site, never asserted (timings on a loaded machine vary).
BUDGET_S = {"00": 10, "01": 35, "02": 25, "03": 30, "04": 20, "05": 45, "06": 45, "07": 60, "08": 60}
# Notebooks executed a second time in the XLA environment, where torch_xla runs their TPU half for real.
XLA_LANE = ("04_tpu_data_loaders",)


@dataclass
class NotebookRun:
    name: str
    status: str  # "ok" | "failed"
    wall_s: float
    peak_rss_mb: float
    results: str | None  # results.json, relative to the build output folder
    error: str | None = None
    lane: str = "main"  # "main" (.venv), "xla" (.venv-xla, PJRT_DEVICE=CPU) or "zh" (notebooks/zh/, in .venv)
    budget_s: float | None = None
    executed: str | None = None  # the executed notebook, relative to the build output folder
    load_1m: float | None = None  # the machine's 1-minute load average when the run ended: timings depend on it


class PeakRss:
    """Samples the memory of this process's children (the kernel and whatever it starts) in a thread."""

    def __init__(self, interval: float = 0.05):
        import psutil

        self._me, self._interval, self.peak = psutil.Process(), interval, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        import psutil

        while not self._stop.is_set():
            total = 0
            for child in self._me.children(recursive=True):
                try:
                    total += child.memory_info().rss
                except psutil.Error:  # a child that ended between listing and reading
                    pass
            self.peak = max(self.peak, total)
            self._stop.wait(self._interval)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def execute(notebook: Path, out_root: Path, parameters: dict | None = None, solutions: bool = True) -> NotebookRun:
    """Execute one notebook with papermill; its output_dir is `out_root/results/<name>`.

    Where `notebooks/solutions/<name>.py` exists, the notebook executed is the one build/solutions.py builds: each
    exercise followed by its worked solution, run in the notebook's kernel after its last code cell (a failing
    assert fails the run; a solutions file that does not fit the notebook fails it before the kernel starts).
    `solutions=False` runs the notebook as committed (for a run whose parameters the solutions were not written for).
    """
    import nbformat
    import papermill

    from build import i18n
    from build import solutions as solution_blocks

    name = notebook.stem
    results_dir = out_root / "results" / name
    results_dir.mkdir(parents=True, exist_ok=True)
    executed = out_root / "executed" / notebook.name
    executed.parent.mkdir(parents=True, exist_ok=True)
    params = {"output_dir": str(results_dir), **(parameters or {})}
    error = None
    start = time.perf_counter()
    with PeakRss() as rss, tempfile.TemporaryDirectory(prefix="solved-") as scratch:
        try:
            translate = None
            if solutions and notebook.parent.name == "zh":  # the Chinese edition: solutions from its catalog
                translate = functools.partial(i18n.zh_solutions, notebook.stem)
            solved = solution_blocks.prepare(notebook, translate) if solutions else None
            source = notebook
            if solved is not None:  # the notebook with its solutions, written where papermill reads it
                source = Path(scratch) / notebook.name
                nbformat.write(solved, source)
            try:
                papermill.execute_notebook(str(source), str(executed), parameters=params, kernel_name="python3",
                                           cwd=str(results_dir), progress_bar=False,
                                           execution_timeout=CELL_TIMEOUT_S)
            finally:
                if solved is not None and executed.exists():  # its input is the course's notebook, not the copy
                    done = nbformat.read(executed, as_version=4)
                    done.metadata.setdefault("papermill", {})["input_path"] = str(notebook)
                    nbformat.write(done, executed)
        except Exception as exc:  # a failing notebook is reported, the next one still runs
            kind = getattr(exc, "ename", None) or type(exc).__name__  # the notebook's own exception, if any
            error = f"{kind}: {getattr(exc, 'evalue', None) or exc}".strip()[:2000]
    wall = round(time.perf_counter() - start, 2)
    results = results_dir / "results.json"
    return NotebookRun(name, "failed" if error else "ok", wall, round(rss.peak / 1024**2, 1),
                       str(results.relative_to(out_root)) if results.exists() else None, error,
                       budget_s=BUDGET_S.get(name[:2]), executed=str(executed.relative_to(out_root)),
                       load_1m=round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None)


@contextlib.contextmanager
def rehearsal_env(blocked: str = "freegpu"):
    """The environment the starters run in, as a learner's activated one: this Python's scripts (`accelerate`) on
    PATH. Kernels started inside cannot import `blocked` (a package of that name, first on PYTHONPATH, raises
    ImportError), see no KAGGLE* variables (notebook_launcher would take this machine for Kaggle) and get
    PJRT_DEVICE=CPU where it is unset (torch_xla then compiles for the CPU)."""
    saved = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="no-" + blocked + "-") as folder:
        (Path(folder) / blocked).mkdir()
        (Path(folder) / blocked / "__init__.py").write_text(
            f"raise ImportError('{blocked} is blocked here: a starter runs with torch and Accelerate alone')\n")
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [folder, os.environ.get("PYTHONPATH")]))
        os.environ["PATH"] = os.pathsep.join(filter(None, [os.path.dirname(sys.executable), os.environ.get("PATH")]))
        os.environ.setdefault("PJRT_DEVICE", "CPU")
        for key in [k for k in os.environ if k.startswith("KAGGLE")]:
            del os.environ[key]
        try:
            yield Path(folder)
        finally:
            os.environ.clear()
            os.environ.update(saved)


def execute_starters(starters: list[Path], out_root: Path) -> list[NotebookRun]:
    """Execute each starter in `rehearsal_env` into `out_root/starters/`; record paths relative to `out_root`."""
    runs = []
    with rehearsal_env():
        for starter in starters:
            print(f"running starter {starter.name} ...", flush=True)
            run = execute(starter, out_root / "starters")
            run.results, run.executed = (f"starters/{p}" if p else None for p in (run.results, run.executed))
            runs.append(run)
    return runs


def run_xla_lane(python: Path, notebooks: list[Path], out_root: Path, parameters: dict) -> list[NotebookRun]:
    """Execute `notebooks` with another environment's Python (.venv-xla), PJRT_DEVICE=CPU; return their records.

    The child is this script, so both lanes run notebooks the same way; its files go to `out_root/xla/`.
    """
    if not notebooks:
        return []
    lane_out = out_root / "xla"
    cmd = [str(python), __file__, "--lane", "xla", "--no-site", "--out", str(lane_out),
           "--notebooks", str(notebooks[0].parent), *(nb.stem for nb in notebooks)]
    for name, value in parameters.items():
        cmd += ["-p", name, value]
    env = {**os.environ, "PJRT_DEVICE": os.environ.get("PJRT_DEVICE", "CPU")}
    print(f"XLA lane ({python}): {', '.join(nb.stem for nb in notebooks)} ...", flush=True)
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        why = (done.stderr or done.stdout).strip()[-2000:] or f"exit {done.returncode}"
    except OSError as exc:  # no such Python
        why = str(exc)
    summary = lane_out / "summary.json"
    if not summary.exists():  # the lane never ran (no such Python, an import error): each notebook failed
        return [NotebookRun(nb.stem, "failed", 0.0, 0.0, None, f"XLA lane did not run: {why}", lane="xla")
                for nb in notebooks]
    runs = []
    for entry in json.loads(summary.read_text())["notebooks"]:
        for key in ("results", "executed"):  # relative to out_root, like the main lane's
            if entry.get(key):
                entry[key] = f"xla/{entry[key]}"
        runs.append(NotebookRun(**entry))
    return runs


def run_zh_lane(notebooks: list[Path], out_root: Path, parameters: dict) -> list[NotebookRun]:
    """Execute the zh notebook of each of `notebooks` (notebooks/zh/, written by build/i18n.py) into `out_root/zh/`."""
    runs = []
    for notebook in notebooks:
        zh = notebook.parent / "zh" / notebook.name
        if not zh.exists():
            runs.append(NotebookRun(notebook.stem, "failed", 0.0, 0.0, None, f"{zh} is missing: run `make sync`",
                                    lane="zh"))
            continue
        print(f"running zh/{zh.name} ...", flush=True)
        run = execute(zh, out_root / "zh", parameters)
        run.lane = "zh"
        run.results, run.executed = (f"zh/{path}" if path else None for path in (run.results, run.executed))
        runs.append(run)
    return runs


def machine() -> dict:
    """What built the course: the numbers that explain its timings."""
    import psutil

    return {"os": platform.platform(terse=True), "python": platform.python_version(),
            "cpu": platform.processor() or platform.machine(), "logical_cpus": os.cpu_count(),
            "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
            "ram_gib": round(psutil.virtual_memory().total / 1024**3, 1)}


def write_summary(out_root: Path, runs: list[NotebookRun], **extra) -> Path:
    """Write summary.json; `extra` adds top-level keys (the site's build time, once the site exists)."""
    path = out_root / "summary.json"
    built_at = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    if extra and path.exists():  # a second write for the same build keeps its date
        built_at = json.loads(path.read_text()).get("built_at", built_at)
    summary = {"built_at": built_at, "machine": machine(), "notebooks": [asdict(r) for r in runs], **extra}
    path.write_text(json.dumps(summary, indent=2) + "\n")
    return path


def build_site(out_root: Path) -> tuple[Path, float]:
    """Build the course site from summary.json and the executed notebooks (build/course_site.py)."""
    from build import course_site

    return course_site.build(out_root)


def parameter_value(text: str):
    """A `-p NAME VALUE` value as papermill's own `-p` reads it: a number or a boolean where it is one, else text."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, (bool, int, float)) else text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Execute every notebook and build the course site.")
    parser.add_argument("names", nargs="*", help="notebook names or prefixes (default: all)")
    parser.add_argument("--out", type=Path, default=OUT, help=f"output folder (default: {OUT})")
    parser.add_argument("--notebooks", type=Path, default=NOTEBOOKS, help=f"notebook folder (default: {NOTEBOOKS})")
    parser.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                        help="a parameter for every notebook, e.g. -p profile smoke (numbers are numbers)")
    parser.add_argument("--xla-python", type=Path, help="also run the XLA lane's notebooks with this Python")
    parser.add_argument("--starters", type=Path, help=f"execute the starters in this folder too (default: {STARTERS} "
                        "with the course's own notebooks, none with --notebooks)")
    parser.add_argument("--no-site", action="store_true", help="execute and summarise only")
    parser.add_argument("--no-zh", action="store_true", help="skip the Chinese edition (notebooks/zh/)")
    parser.add_argument("--lane", default="main", help=argparse.SUPPRESS)  # set by run_xla_lane in its child
    args = parser.parse_args(argv)
    notebooks = [nb for nb in sorted(args.notebooks.glob("*.ipynb"))
                 if not args.names or any(nb.stem.startswith(n) for n in args.names)]
    runs = []
    for notebook in notebooks:
        print(f"running {notebook.name} ...", flush=True)
        run = execute(notebook, args.out, {name: parameter_value(value) for name, value in args.parameter})
        if args.lane != "main":  # the budgets are the main environment's
            run.lane, run.budget_s = args.lane, None
        runs.append(run)
    if args.lane == "main" and args.notebooks == NOTEBOOKS and not args.no_zh:
        runs += run_zh_lane(notebooks, args.out, {name: parameter_value(value) for name, value in args.parameter})
    starters_dir = args.starters or (STARTERS if args.notebooks == NOTEBOOKS and args.lane == "main" else None)
    if starters_dir:
        runs += execute_starters([s for s in sorted(starters_dir.glob("*.ipynb"))
                                  if not args.names or any(s.stem.startswith(n) for n in args.names)], args.out)
    if args.xla_python:
        runs += run_xla_lane(args.xla_python, [nb for nb in notebooks if nb.stem in XLA_LANE], args.out,
                             dict(args.parameter))
    if args.lane == "main":  # push-ready Kaggle folders and the offline wheelhouse (notebook 06)
        from build.kaggle_bundles import write_course_bundles

        write_course_bundles(args.out / "kaggle", notebooks)
    write_summary(args.out, runs)
    print(f"\n{'notebook':32} {'lane':5} {'status':7} {'wall s':>7} {'budget':>7} {'peak MB':>8}")
    for run in runs:
        budget = f"{run.budget_s:g}" if run.budget_s is not None else "-"
        print(f"{run.name:32} {run.lane:5} {run.status:7} {run.wall_s:7.1f} {budget:>7} {run.peak_rss_mb:8.0f}")
    site_error = None
    if not args.no_site:
        try:
            index, seconds = build_site(args.out)
            write_summary(args.out, runs, site={"build_s": seconds})
            print(f"\nsite: {index} (built in {seconds:.1f} s)")
        except RuntimeError as exc:  # course_site.SiteBuildError: Sphinx's warnings, which are errors here
            site_error = str(exc)
    print(f"summary: {args.out / 'summary.json'}")
    failed = [f"{r.name}" + {"xla": " (XLA lane)", "zh": " (zh)"}.get(r.lane, "") for r in runs if r.status != "ok"]
    if failed:
        print(f"FAILED: {', '.join(failed)}", file=sys.stderr)
        for run in runs:
            if run.error:
                print(f"  {run.name}: {run.error}", file=sys.stderr)
    if site_error:
        print(f"SITE FAILED: {site_error}", file=sys.stderr)
    return 1 if failed or site_error else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))  # the siblings import as build.<name>, as in the tests
    sys.exit(main())
