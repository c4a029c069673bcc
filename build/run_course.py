"""Run the whole course headless and build its site: `make course` calls this.

Executes every notebook in notebooks/ with papermill (profile `auto`: `smoke` on a CPU-only machine) and writes
build/out/:

    executed/<name>.ipynb    the notebooks with their outputs
    results/<name>/          each notebook's output_dir (results.json, plots, checkpoints...)
    site/index.html          status, wall time, peak memory and key results of every notebook
    site/<name>.html         each executed notebook rendered by nbconvert
    summary.json             {"notebooks": [{"name", "status", "wall_s", "peak_rss_mb", "results", "error"}]}

A notebook that fails does not stop the others; the command exits 1 at the end and names it.
The tests use `execute` from here too, so the course and the tests run notebooks the same way.
"""

from __future__ import annotations

import argparse
import html
import json
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from freegpu.results import COMMON_KEYS, format_value

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
OUT = ROOT / "build" / "out"
CELL_TIMEOUT_S = 900


@dataclass
class NotebookRun:
    name: str
    status: str  # "ok" | "failed"
    wall_s: float
    peak_rss_mb: float
    results: str | None  # results.json, relative to the build output folder
    error: str | None = None


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


def execute(notebook: Path, out_root: Path, parameters: dict | None = None) -> NotebookRun:
    """Execute one notebook with papermill; its output_dir is `out_root/results/<name>`."""
    import papermill

    name = notebook.stem
    results_dir = out_root / "results" / name
    results_dir.mkdir(parents=True, exist_ok=True)
    executed = out_root / "executed" / notebook.name
    executed.parent.mkdir(parents=True, exist_ok=True)
    params = {"output_dir": str(results_dir), **(parameters or {})}
    error = None
    start = time.perf_counter()
    with PeakRss() as rss:
        try:
            papermill.execute_notebook(str(notebook), str(executed), parameters=params, kernel_name="python3",
                                       cwd=str(results_dir), progress_bar=False,
                                       execution_timeout=CELL_TIMEOUT_S)
        except Exception as exc:  # a failing notebook is reported, the next one still runs
            kind = getattr(exc, "ename", None) or type(exc).__name__  # the notebook's own exception, if any
            error = f"{kind}: {getattr(exc, 'evalue', None) or exc}".strip()[:2000]
    wall = round(time.perf_counter() - start, 2)
    results = results_dir / "results.json"
    return NotebookRun(name, "failed" if error else "ok", wall, round(rss.peak / 1024**2, 1),
                       str(results.relative_to(out_root)) if results.exists() else None, error)


def _key_results(out_root: Path, run: NotebookRun, fallback: int = 8) -> str:
    """The values the notebook highlighted (`Run.highlight`), else its first few scalars."""
    if not run.results:
        return ""
    values = json.loads((out_root / run.results).read_text())
    keys = values.get("headline") or [k for k, v in values.items()
                                      if k not in COMMON_KEYS and isinstance(v, (int, float, bool))][:fallback]
    return "<br>".join(f"<code>{html.escape(k)}</code> = {html.escape(format_value(values[k]))}" for k in keys)


def build_site(out_root: Path, runs: list[NotebookRun]) -> Path:
    """Render each executed notebook to HTML and write an index page."""
    from nbconvert import HTMLExporter

    site = out_root / "site"
    site.mkdir(parents=True, exist_ok=True)
    exporter = HTMLExporter(template_name="lab")
    rows = []
    for run in runs:
        executed = out_root / "executed" / f"{run.name}.ipynb"
        link = html.escape(run.name)
        if executed.exists():
            body, _ = exporter.from_filename(str(executed))
            (site / f"{run.name}.html").write_text(body)
            link = f'<a href="{run.name}.html">{link}</a>'
        status = html.escape(run.status) + (f"<br><small>{html.escape(run.error)}</small>" if run.error else "")
        rows.append(f"<tr><td>{link}</td><td class='{run.status}'>{status}</td><td>{run.wall_s}</td>"
                    f"<td>{run.peak_rss_mb}</td><td>{_key_results(out_root, run)}</td></tr>")
    index = site / "index.html"
    index.write_text(
        "<!doctype html><html><head><meta charset='utf-8'><title>Accelerate on free notebooks</title>"
        "<style>body{font-family:sans-serif;margin:2em}td,th{border:1px solid #ccc;padding:.4em;"
        "vertical-align:top}table{border-collapse:collapse}.ok{color:green}.failed{color:#b00}</style></head><body>"
        "<h1>Accelerate on free notebooks</h1><p>Built " + time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        + ". Every number below was measured in this build, on the machine that built it.</p>"
        "<table><tr><th>notebook</th><th>status</th><th>wall s</th><th>peak RSS MB</th><th>key results</th></tr>"
        + "".join(rows) + "</table></body></html>\n")
    return index


def write_summary(out_root: Path, runs: list[NotebookRun]) -> Path:
    path = out_root / "summary.json"
    path.write_text(json.dumps({"notebooks": [asdict(r) for r in runs]}, indent=2) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Execute every notebook and build the course site.")
    parser.add_argument("names", nargs="*", help="notebook names or prefixes (default: all)")
    parser.add_argument("--out", type=Path, default=OUT, help=f"output folder (default: {OUT})")
    parser.add_argument("--notebooks", type=Path, default=NOTEBOOKS, help=f"notebook folder (default: {NOTEBOOKS})")
    parser.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                        help="a parameter for every notebook, e.g. -p profile smoke")
    args = parser.parse_args(argv)
    notebooks = [nb for nb in sorted(args.notebooks.glob("*.ipynb"))
                 if not args.names or any(nb.stem.startswith(n) for n in args.names)]
    runs = []
    for notebook in notebooks:
        print(f"running {notebook.name} ...", flush=True)
        runs.append(execute(notebook, args.out, dict(args.parameter)))
    build_site(args.out, runs)
    write_summary(args.out, runs)
    print(f"\n{'notebook':32} {'status':7} {'wall s':>7} {'peak MB':>8}")
    for run in runs:
        print(f"{run.name:32} {run.status:7} {run.wall_s:7.1f} {run.peak_rss_mb:8.0f}")
    print(f"\nsite: {args.out / 'site' / 'index.html'}\nsummary: {args.out / 'summary.json'}")
    failed = [r.name for r in runs if r.status != "ok"]
    if failed:
        print(f"FAILED: {', '.join(failed)}", file=sys.stderr)
        for run in runs:
            if run.error:
                print(f"  {run.name}: {run.error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
