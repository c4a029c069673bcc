"""Build the course site from the executed notebooks: Sphinx + myst-nb + sphinx-book-theme, strict, offline.

`make course` runs this after build/run_course.py has executed the notebooks; it never executes a cell.

    python build/course_site.py [--out build/out]

reads   <out>/summary.json, <out>/executed/*.ipynb (and <out>/xla/executed/ for the XLA lane),
        each run's results.json and the plots beside it, docs/ (conf.py, the front page, CSS), README.md's table;
stages  <out>/site-src/: the front page, one page per notebook in course order, "What this build measured";
writes  <out>/site/ with `sphinx-build -W` (a broken link, missing image or unknown page fails the build).

A notebook's page is its XLA-lane execution where one exists (notebook 04), with the main-environment run kept
as a second page; the starters (executed into <out>/starters/) get pages under "Starters". A link to a notebook
number that this build has no page for (a planned notebook) becomes plain text; any other unresolved link fails.
Launch links come from build/sync_notebooks.py, like the badges.

The Chinese edition is built the same way into <out>/site/zh/, from the zh lane's runs (notebooks/zh/, executed
into <out>/zh/) and docs/zh/ (its front page, the 中英术语表 and the 纠错对照表). Every page has a switch to the
same page in the other language; the builder's own words on a zh page come from locale/zh/site.po (`t`).
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
OUT = ROOT / "build" / "out"
IMAGE_SUFFIXES = (".png", ".svg", ".jpg", ".jpeg", ".gif")
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
EDITIONS = {"en": "en", "zh": "zh_CN"}  # the editions and their Sphinx `language`
SITE_CATALOG = ROOT / "locale" / "zh" / "site.po"
_edition = {"language": "en"}
# `[text](02_mixed_precision.ipynb)`, `[text](notebooks/02_x.ipynb#step-1)`: group 1 the text, group 2 the number.
NOTEBOOK_LINK = re.compile(r"(?<!!)\[([^\]]+)\]\((?:\.\./)?(?:notebooks/)?(\d\d)_[\w.-]*?\.ipynb(?:#[\w-]*)?\)")
TABLE_MARKER = "<!-- course:notebook-table -->"
BUILD_MARKER = "<!-- course:build-line -->"


class SiteBuildError(RuntimeError):
    """Sphinx refused the site (its warnings are errors); the message holds what it said."""


@dataclass
class Page:
    name: str  # the notebook's name, e.g. 04_tpu_data_loaders
    docname: str  # the page, e.g. notebooks/04_tpu_data_loaders
    run: dict  # the summary.json entry this page shows
    executed: Path


MACHINE_LABELS = {"os": "OS", "python": "Python", "cpu": "CPU", "logical_cpus": "logical CPUs",
                  "usable_cpus": "usable CPUs", "ram_gib": "RAM GiB"}


def t(message: str) -> str:
    """`message` in the language of the edition being staged: English, or its Chinese from locale/zh/site.po."""
    if _edition["language"] == "en":
        return message
    return _site_catalog().get(message, message)


def _site_catalog() -> dict[str, str]:
    import polib

    if not SITE_CATALOG.exists():
        return {}
    return {e.msgid: e.msgstr for e in polib.pofile(str(SITE_CATALOG)) if e.msgstr and "fuzzy" not in e.flags}


def lane_title(lane: str) -> str:
    return {"main": t("main environment"), "xla": t("XLA lane"), "zh": t("main environment")}.get(lane, lane)


def escape(text: str) -> str:
    """Text shown as itself in MyST markdown (a measured string may hold `*`, `_`, `<`, `|` or a role's braces)."""
    return re.sub(r"([\\`*_\[\]<>{}|$])", r"\\\1", text.replace("\n", " "))


def _format(value: Any) -> str:
    """A measured value for a table cell; a dict of dicts reads as `key: (inner values); ...`."""
    from freegpu.results import format_value

    if isinstance(value, dict) and any(isinstance(v, dict) for v in value.values()):
        return escape("; ".join(f"{k}: ({format_value(v)})" if isinstance(v, dict) else f"{k}: {format_value(v)}"
                                for k, v in value.items()))
    return escape(format_value(value))


def measured(value: Any) -> Any:
    """`value` without what did not run: None entries are dropped from dicts and lists (None itself stays None)."""
    if isinstance(value, dict):
        kept = {k: measured(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v is not None} or None
    if isinstance(value, (list, tuple)):
        kept = [measured(v) for v in value]
        return [v for v in kept if v is not None] or None
    return value


def key_results(values: dict, fallback: int = 8) -> dict[str, Any]:
    """The values a notebook highlighted (`Run.highlight`), else its first scalars; what did not run is left out."""
    from freegpu.results import COMMON_KEYS

    keys = values.get("headline") or [k for k, v in values.items()
                                      if k not in COMMON_KEYS and isinstance(v, (int, float, bool))][:fallback]
    kept = {k: measured(values.get(k)) for k in keys}
    return {k: v for k, v in kept.items() if v is not None}


def notebook_title(nb, default: str) -> str:
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return default


def unlink_missing(text: str, numbers: set[str]) -> str:
    """Links to notebooks this build has no page for (planned ones) become their plain text."""
    return NOTEBOOK_LINK.sub(lambda m: m.group(0) if m.group(2) in numbers else m.group(1), text)


def _run_note(page: Page, results: dict | None, other: Page | None) -> str:
    run = page.run
    lines = [t("Executed by this build: **{status}**, {wall}, peak memory {memory}").format(
        status=run["status"], wall=_wall(run), memory=_memory(run))]
    if results:  # a starter's results have a device and no profile
        lines[0] += "".join(f", {key} `{results[key]}`" for key in ("profile", "device")
                            if results.get(key) is not None)
    lines[0] += t(". See {{ref}}`what this build measured <measured-{name}>`.").format(name=page.name)
    if run.get("lane") == "xla":
        versions = measured((results or {}).get("versions")) or {}
        pair = ", ".join(f"{k} {versions[k]}" for k in ("torch", "torch_xla") if k in versions)
        lines.append(t("This page is the **XLA-lane** execution ({pair}; `PJRT_DEVICE=CPU`: real XLA, compiled "
                       "for the CPU), so the notebook's TPU half ran.").format(pair=pair))
    if other is not None:
        label = t("the XLA-lane execution") if other.run.get("lane") == "xla" else t("the main-environment run")
        lines.append(t("Compare with [{label}]({page}.ipynb).").format(label=label, page=Path(other.docname).name))
    if run.get("error"):
        lines.append(t("The run failed: {error}").format(error=escape(run["error"].splitlines()[0][:300])))
    kind = "note" if run["status"] == "ok" else "warning"
    return f":::{{{kind}}}\n:class: run-note\n" + "\n\n".join(lines) + "\n:::"


QUOTED_PATH = re.compile(r"""(["'])(/[^"'\n]*)\1""")
WRITTEN = re.compile(r"^((?:Over)?[Ww]riting )(/.*)$", re.M)  # what %%writefile prints: "Writing /abs/train.py"


def relative_path(text: str, roots: tuple[Path, ...]) -> str:
    """`text`, an absolute path under one of `roots` (the first that holds it), relative to it; else unchanged."""
    for root in roots:
        try:
            return Path(text).relative_to(root).as_posix()
        except ValueError:
            continue
    return text


def strip_build_paths(nb, roots: tuple[Path, ...]) -> None:
    """Drop papermill's absolute input/output paths from the metadata, and write the build machine's absolute paths
    (under the repository or the build folder) in its parameters, its injected-parameters cell and what a
    `%%writefile` cell printed as relative ones."""
    papermill = nb.metadata.get("papermill")
    if papermill:
        papermill.pop("input_path", None)
        papermill.pop("output_path", None)
        papermill["parameters"] = {key: relative_path(value, roots) if isinstance(value, str) else value
                                   for key, value in papermill.get("parameters", {}).items()}
    for cell in nb.cells:
        if "injected-parameters" in cell.metadata.get("tags", []):
            cell.source = QUOTED_PATH.sub(lambda m: m[1] + relative_path(m[2], roots) + m[1], cell.source)
        if cell.cell_type == "code" and cell.source.startswith("%%writefile"):
            for output in cell.get("outputs", []):
                if output.get("output_type") == "stream":
                    output.text = WRITTEN.sub(lambda m: m[1] + relative_path(m[2], roots), output.text)


def stage_notebook(page: Page, dest: Path, links: dict[str, str], numbers: set[str], note: str,
                   roots: tuple[Path, ...] = ()) -> str:
    """Copy an executed notebook into the site (launch links after the title, no widget state, planned links as
    text, build paths relative to `roots`); return its title."""
    nb = nbformat.read(page.executed, as_version=4)
    title = notebook_title(nb, page.name)
    nb.metadata.pop("widgets", None)
    strip_build_paths(nb, roots)
    nb.cells = [c for c in nb.cells if "badges" not in c.metadata.get("tags", [])]
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = unlink_missing(cell.source, numbers)
        for output in cell.get("outputs", []):
            output.get("data", {}).pop(WIDGET_VIEW, None)
        if cell.cell_type == "code":
            cell.outputs = [o for o in cell.outputs if "data" not in o or o["data"]]
    title_at = next((i for i, c in enumerate(nb.cells)
                     if c.cell_type == "markdown" and c.source.lstrip().startswith("# ")), None)
    if title_at is None:
        nb.cells.insert(0, nbformat.v4.new_markdown_cell(f"# {page.name}"))
        title_at = 0
    if page.run.get("lane") == "main" and page.docname.endswith("-main-env"):
        cell = nb.cells[title_at]
        cell.source = re.sub(r"^(\s*# .*)$", r"\1 (main environment)", cell.source, count=1, flags=re.M)
    launch = (":::{container} launch-links\n"
              f"[{t('Open in {platform}').format(platform='Colab')}]({links['colab']}) "
              f"[{t('Open in {platform}').format(platform='Kaggle')}]({links['kaggle']})\n:::")
    nb.cells[title_at + 1:title_at + 1] = [nbformat.v4.new_markdown_cell(launch), nbformat.v4.new_markdown_cell(note)]
    dest.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, dest)
    return title


def _memory(run: dict) -> str:
    return f"{run['peak_rss_mb']:.0f} MB" if run.get("peak_rss_mb") else "-"


def _wall(run: dict) -> str:
    wall, budget = run.get("wall_s"), run.get("budget_s")
    if run["status"] != "ok" and not wall:  # never started (the XLA lane's environment was missing)
        return t("did not start")
    if budget is None:
        return f"{wall:.1f} s"
    over = t(" [over budget]{{.over-budget}}") if wall > budget else ""
    return t("{wall} s of {budget} s").format(wall=f"{wall:.1f}", budget=f"{budget:g}") + over


def _results(out_root: Path, run: dict) -> dict | None:
    return json.loads((out_root / run["results"]).read_text()) if run.get("results") else None


def _plots(out_root: Path, run: dict, src: Path) -> list[str]:
    """Copy the images a run saved next to its results.json into the site; return their paths there."""
    if not run.get("results"):
        return []
    folder = (out_root / run["results"]).parent
    found = []
    for image in sorted(p for p in folder.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file()):
        rel = Path("measured") / run.get("lane", "main") / run["name"] / image.relative_to(folder)
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(image, src / rel)
        found.append(rel.as_posix())
    return found


def measurements_page(out_root: Path, summary: dict, titles: dict[str, str], src: Path) -> str:
    """The page "What this build measured", as MyST markdown, from summary.json and every results.json."""
    runs = summary["notebooks"]
    ok = sum(r["status"] == "ok" for r in runs)
    lines = [t("# What this build measured"), "",
             t("{runs} notebook runs, {ok} ok, {failed} failed. Each notebook ran headless under "
               "papermill; wall time is the whole notebook (kernel start included), peak memory is the resident "
               "memory of the kernel and everything it started. Budgets are benchmarks, not limits; machine load is "
               "the 1-minute load average when the run ended (above the number of CPUs, other work was competing)."
               ).format(runs=len(runs), ok=ok, failed=len(runs) - ok)]
    if summary.get("built_at"):
        built = dt.datetime.fromisoformat(summary["built_at"]).astimezone(dt.UTC)
        lines += ["", t("Built {when} UTC.").format(when=f"{built:%Y-%m-%d %H:%M}")]
    machine = measured(summary.get("machine")) or {}
    if machine:
        lines += ["", t("**Machine:**") + " " + "; ".join(f"{MACHINE_LABELS.get(k, escape(k))} {_format(v)}"
                                                          for k, v in machine.items()) + "."]
    lines += ["", t("| notebook | lane | status | wall time | peak memory |"), "|---|---|---|---|---|"]
    for run in runs:
        lane = lane_title(run.get("lane", "main"))
        lines.append(f"| {{ref}}`{titles.get(run['name'], run['name'])} <measured-{run['name']}>` | {lane} | "
                     f"[{run['status']}]{{.status-{run['status']}}} | {_wall(run)} | {_memory(run)} |")
    for name in dict.fromkeys(r["name"] for r in runs):
        lines += ["", *_notebook_section(out_root, name, titles.get(name, name),
                                         [r for r in runs if r["name"] == name], src)]
    return "\n".join(lines) + "\n"


def _notebook_section(out_root: Path, name: str, title: str, runs: list[dict], src: Path) -> list[str]:
    results = [_results(out_root, r) for r in runs]
    heads = [lane_title(r.get("lane", "main")) for r in runs]
    rows = {t("status"): [f"[{r['status']}]{{.status-{r['status']}}}" for r in runs],
            t("wall time"): [_wall(r) for r in runs], t("peak memory"): [_memory(r) for r in runs],
            t("machine load"): [f"{r['load_1m']:.1f}" if r.get("load_1m") is not None else "-" for r in runs]}
    for label in ("profile", "platform", "device"):
        rows[label] = [_format(v[label]) if v and v.get(label) is not None else "" for v in results]
    keyed = [key_results(v) if v else {} for v in results]
    for key in dict.fromkeys(k for values in keyed for k in values):
        rows[f"`{key}`"] = [_format(values[key]) if key in values else t("not run") for values in keyed]
    lines = [f"(measured-{name})=", f"## {title}", "", "| | " + " | ".join(heads) + " |",
             "|---" * (len(runs) + 1) + "|"]
    lines += [f"| {label} | " + " | ".join(cells) + " |" for label, cells in rows.items()]
    for run, values, head in zip(runs, results, heads, strict=True):
        if run.get("error"):
            lines += ["", t("The {lane} run failed:").format(lane=head), "", "````text", run["error"], "````"]
        versions = measured((values or {}).get("versions"))
        if versions:
            listed = escape(", ".join(f"{k} {v}" for k, v in versions.items()))
            lines += ["", t("Versions ({lane}):").format(lane=head) + " " + listed + "."]
        for plot in _plots(out_root, run, src):
            caption = t("`{file}`, saved by the {lane} run").format(file=Path(plot).name, lane=head)
            lines += ["", f"```{{figure}} {plot}", ":width: 90%", "", caption, "```"]
    return lines


def build_line(out_root: Path, summary: dict) -> str:
    """How this build ran the notebooks, from their results: profiles, devices, lanes, the machine's CPUs."""
    results = [v for v in (_results(out_root, r) for r in summary["notebooks"]) if v]
    parts = []
    for key, label in (("profile", "profile"), ("device", "device")):
        found = sorted({str(v[key]) for v in results if v.get(key) is not None})
        if found:
            parts.append(f"{label} {', '.join(f'`{f}`' for f in found)}")
    lanes = sorted({lane_title(r.get("lane", "main")) for r in summary["notebooks"]})
    parts.append(t(" and ").join(lanes))
    cpus = (summary.get("machine") or {}).get("logical_cpus")
    if cpus:
        parts.append(t("{cpus} logical CPUs").format(cpus=cpus))
    return "; ".join(parts)


def readme_table(readme: str, pages: dict[str, Page]) -> str:
    """The README's notebook table, its links pointing at the site's pages (plain text where there is none)."""
    lines = readme.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("| # |")), None)
    if start is None:
        return ""
    table = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        table.append(line)

    def link(match: re.Match) -> str:
        page = pages.get(match.group(2))
        return f"[{match.group(1)}]({page.docname}.ipynb)" if page else match.group(1)

    return re.sub(r"\[([^\]]+)\]\(notebooks/([\w.-]+)\.ipynb\)", link, "\n".join(table))


def is_starter(run: dict) -> bool:
    """A run of starters/ (run_course.py `execute_starters` writes them under <out>/starters/)."""
    return (run.get("executed") or "").startswith("starters/")


def collect_pages(out_root: Path, summary: dict) -> tuple[dict[str, Page], list[Page]]:
    """Each notebook's page (its XLA-lane run where there is one), and the main-environment runs kept beside them."""
    by_name: dict[str, dict[str, Page]] = {}
    for run in summary["notebooks"]:
        run.setdefault("lane", "main")
        executed = out_root / (run.get("executed") or f"executed/{run['name']}.ipynb")
        folder = "starters" if is_starter(run) else "notebooks"
        if executed.exists():
            by_name.setdefault(run["name"], {})[run["lane"]] = Page(run["name"], f"{folder}/{run['name']}", run,
                                                                     executed)
    pages, extra = {}, []
    for name, lanes in by_name.items():
        pages[name] = lanes.get("xla") or lanes.get("main") or next(iter(lanes.values()))
        for lane, page in lanes.items():
            if page is not pages[name]:
                page.docname += f"-{lane}-env"
                extra.append(page)
    return pages, extra


def stage(out_root: Path, src: Path, repo_root: Path = ROOT, language: str = "en") -> dict:
    """Write the Sphinx source folder of the `language` edition; return the course settings it used.

    The English edition shows every run but the zh lane's; the zh edition shows the zh lane's runs, with docs/zh/
    as its pages (conf.py and _static are shared)."""
    from build import sync_notebooks as sync

    _edition["language"] = language
    summary = json.loads((out_root / "summary.json").read_text())
    summary = {**summary, "notebooks": [r for r in summary["notebooks"]
                                        if (r.get("lane") == "zh") == (language == "zh")]}
    settings = sync.course_settings()
    docs = DOCS / language if language != "en" else DOCS
    shutil.rmtree(src, ignore_errors=True)
    shutil.copytree(docs, src, ignore=shutil.ignore_patterns("_build", "__pycache__", *EDITIONS))
    if language != "en":
        shutil.copyfile(DOCS / "conf.py", src / "conf.py")
        shutil.copytree(DOCS / "_static", src / "_static")
    pages, extra = collect_pages(out_root, summary)
    numbers = {name[:2] for name in pages}
    roots = tuple(dict.fromkeys(p for root in (repo_root, out_root) for p in (root.absolute(), root.resolve())))
    titles, launch = {}, {}
    for page in [*pages.values(), *extra]:
        links = sync.launch_links(page.name if language == "en" else f"{language}/{page.name}", settings)
        if is_starter(page.run):  # the badges' URLs, in the repository's starters/ folder
            links = {k: v.replace(f"/blob/{settings['branch']}/notebooks/", f"/blob/{settings['branch']}/starters/")
                     for k, v in links.items()}
        launch[page.docname] = links
        other = next((p for p in [*pages.values(), *extra] if p.name == page.name and p is not page), None)
        results = _results(out_root, page.run)
        title = stage_notebook(page, src / f"{page.docname}.ipynb", links, numbers, _run_note(page, results, other),
                               roots=roots)
        titles.setdefault(page.name, title)
    (src / "measurements.md").write_text(measurements_page(out_root, summary, titles, src))
    readme = (repo_root / "README.md").read_text() if (repo_root / "README.md").exists() else ""
    if language != "en":  # the front page's table: the zh notebooks' own titles
        readme = "| # | " + t("notebook") + " |\n|---|---|\n" + "\n".join(
            f"| {name[:2]} | [{titles[name]}](notebooks/{name}.ipynb) |" for name in sorted(titles)
            if not is_starter(pages[name].run))
    starters = sorted(name for name, page in pages.items() if is_starter(page.run))
    toctree = ["```{toctree}", ":caption: " + t("Notebooks"), ":hidden:", "",
               *(pages[name].docname for name in sorted(pages) if name not in starters), "measurements", "```"]
    if starters:
        toctree += ["", "```{toctree}", ":caption: " + t("Starters"), ":hidden:", "",
                    *(pages[n].docname for n in starters),
                    "```"]
    guides = sorted(p.stem for p in docs.glob("*.md") if p.stem != "index")  # troubleshooting, glossary, ...
    if guides:
        toctree += ["", "```{toctree}", ":caption: " + t("Reference"), ":hidden:", "", *guides, "```"]
    if extra:
        toctree += ["", "```{toctree}", ":caption: " + t("Runs kept for comparison"), ":hidden:", "",
                    *(p.docname for p in extra), "```"]
    index = (src / "index.md").read_text().replace(TABLE_MARKER, readme_table(readme, pages) + "\n\n"
                                                   + "\n".join(toctree))
    index = index.replace(BUILD_MARKER, build_line(out_root, summary))
    (src / "index.md").write_text(index)
    docnames = sorted({p.relative_to(src).with_suffix("").as_posix() for p in src.rglob("*")
                       if p.suffix in (".md", ".ipynb") and "_static" not in p.parts})
    course = {"title": t("Accelerate on free notebooks"), "version": settings["version"],
              "copyright": time.strftime("%Y"), "repository": settings["repo"], "branch": settings["branch"],
              "launch": launch, "language": EDITIONS[language], "edition": language, "pages": docnames,
              "run_this": t("Run this notebook"), "open_in": t("Open in {platform}")}
    (src / "course.json").write_text(json.dumps(course, indent=2) + "\n")
    return course


def build(out_root: Path = OUT, repo_root: Path = ROOT) -> tuple[Path, float]:
    """Stage and build the site into `out_root/site` (the zh edition into `site/zh/` when the zh lane ran); return
    its index page and the seconds it took."""
    missing = [m for m in ("sphinx", "myst_nb", "sphinx_book_theme") if importlib.util.find_spec(m) is None]
    if missing:
        raise SiteBuildError(f"{', '.join(missing)} not installed: pip install -c constraints.txt -e '.[site]'")
    start = time.perf_counter()
    site = out_root / "site"
    shutil.rmtree(site, ignore_errors=True)
    summary = json.loads((out_root / "summary.json").read_text())
    editions = ["en"] + (["zh"] if any(r.get("lane") == "zh" for r in summary["notebooks"]) else [])
    folders = {language: out_root / ("site-src" if language == "en" else f"site-src-{language}")
               for language in editions}
    try:
        courses = {language: stage(out_root, src, repo_root, language) for language, src in folders.items()}
    finally:
        _edition["language"] = "en"
    for language, src in folders.items():  # each page's language switch: the same page in the other edition
        others = {other: course["pages"] for other, course in courses.items() if other != language}
        course = {**courses[language], "editions": others}
        (src / "course.json").write_text(json.dumps(course, indent=2, ensure_ascii=False) + "\n")
    for language, src in folders.items():
        doctrees = out_root / (".site-doctrees" if language == "en" else f".site-doctrees-{language}")
        target = site if language == "en" else site / language
        shutil.rmtree(doctrees, ignore_errors=True)
        cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-E", "-q", "-d",
               str(doctrees), str(src), str(target)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise SiteBuildError(f"sphinx-build ({language}) failed (exit {done.returncode}); in a notebook, a "
                                 "line like 50002 points at cell 5 (counting from 1) of its staged copy in "
                                 f"{src}:\n{done.stderr.strip() or done.stdout}")
    return site / "index.html", round(time.perf_counter() - start, 2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help=f"the course build folder (default: {OUT})")
    args = parser.parse_args(argv)
    try:
        index, seconds = build(args.out)
    except SiteBuildError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(f"site: {index} ({seconds:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))  # the siblings import as build.<name>, as in the tests
    sys.exit(main())
