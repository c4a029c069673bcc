"""The course site (build/course_site.py), built from a small fake executed course in a few seconds.

The fake course has what a real build has: a page with an image and a results table, a notebook that failed, a
notebook run in both lanes (main environment and XLA lane) with values that did not run in one of them, a link to
a planned notebook, and an over-budget run. The browser check needs Debian's `chromium`; it is skipped without it.
"""

from __future__ import annotations

import base64
import json
import os
import re
import select
import shutil
import subprocess
import sys
import time
from html import unescape
from pathlib import Path

import nbformat
import pytest

from build import course_site, solutions
from build import sync_notebooks as sync

pytest.importorskip("myst_nb", reason="the site extra is not installed (pip install -e '.[site]')")

# A 2x2 PNG, so the image output is real.
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAFklEQVR4nGP8z8DAwMDAxMDAwMDA"
                       "AAANHQEDasKb6QAAAABJRU5ErkJggg==")
# A word in the middle of a Chinese sentence: Sphinx's Chinese search (jieba) must cut it out to find it.
ZH_SENTENCE = "每个进程都保存一份模型副本，反向传播之后用全归约平均各进程的梯度。"
ZH_SEARCH_WORD = "副本"
SEARCH_WORD = "zebrafinch"  # only notebook 01 says it
ANSI_TRACEBACK = ["\x1b[0;31mValueError\x1b[0m                                Traceback (most recent call last)",
                  "\x1b[0;31mValueError\x1b[0m: boom"]


def _notebook(path: Path, *cells) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "Python 3"}
    nb.cells = list(cells)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)


def _md(source: str, tags=()):
    return nbformat.v4.new_markdown_cell(source, metadata={"tags": list(tags)} if tags else {})


def _code(source: str, *outputs):
    cell = nbformat.v4.new_code_cell(source)
    cell.outputs = list(outputs)
    return cell


def _results(out: Path, rel: str, **values) -> None:
    path = out / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    common = {"profile": "smoke", "platform": "headless", "device": "cpu",
              "versions": {"python": "3.11.7", "torch": "2.13.0", "torch_xla": None}}
    path.write_text(json.dumps({**common, **values}))


def _run(name, lane="main", status="ok", wall_s=3.0, budget_s=10, results=True, error=None):
    prefix = f"{lane}/" if lane in ("xla", "zh") else ""
    return {"name": name, "lane": lane, "status": status, "wall_s": wall_s, "budget_s": budget_s,
            "peak_rss_mb": 512.0, "results": f"{prefix}results/{name}/results.json" if results else None,
            "executed": f"{prefix}executed/{name}.ipynb", "error": error, "load_1m": 5.25}


def fake_course(root: Path) -> Path:
    """A course build folder as build/run_course.py leaves it, and a README with the notebook table."""
    out = root / "out"
    settings = sync.course_settings()
    table = nbformat.v4.new_output("display_data", data={
        "text/markdown": "| measure | value |\n|---|---|\n| `accuracy` | 0.93 |", "text/plain": "accuracy 0.93"})
    image = nbformat.v4.new_output("display_data", data={"image/png": base64.b64encode(PNG).decode(),
                                                         "text/plain": "<Figure>"})
    _notebook(out / "executed/00_intro.ipynb", _md(sync.badges_source("00_intro", settings), tags=["badges"]),
              _md("# 00 · Intro\n\nWhy this notebook."), _code("plot()", image, table),
              _md("## Exercises\n\n1. **Predict.** What is 6 x 7?\n2. **Modify.** And 6 x 8?\n\n"
                  "## Next\n\n[01 · Words](01_words.ipynb), later [02 · Planned](02_planned.ipynb)."))
    solved = solutions.with_solutions(nbformat.read(out / "executed/00_intro.ipynb", as_version=4),
                                      ["assert 6 * 7 == 42\nprint('6 x 7 is 42.')", "assert 6 * 8 == 48"])
    for cell in solved.cells:  # as executed: the solutions' outputs
        if cell.get("metadata", {}).get("exercise") == 1:
            cell.outputs = [nbformat.v4.new_output("stream", text="6 x 7 is 42.\n")]
    nbformat.write(solved, out / "executed/00_intro.ipynb")
    # A %%writefile of a shell script (07's train.sbatch): the ipython3 lexer fails on it; the strict build must not.
    _notebook(out / "executed/01_words.ipynb", _md("# 01 · Words"),
              _md(f"The launcher forks a {SEARCH_WORD} per process; see [00](00_intro.ipynb)."),
              _code('%%writefile train.sbatch\nMAIN_IP=${MAIN_IP:-$(scontrol show hostnames "$NODES" | head -n 1)}'))
    error = nbformat.v4.new_output("error", ename="ValueError", evalue="boom", traceback=ANSI_TRACEBACK)
    _notebook(out / "executed/03_broken.ipynb", _md("# 03 · Broken"), _code("raise ValueError('boom')", error))
    _notebook(out / "executed/04_xla.ipynb", _md("# 04 · XLA"),
              _code("run()", nbformat.v4.new_output("stream", text="lane: main environment\n")))
    _notebook(out / "xla/executed/04_xla.ipynb", _md("# 04 · XLA"),
              _code("run()", nbformat.v4.new_output("stream", text="lane: compiled on xla:0\n")))
    _results(out, "results/00_intro/results.json", headline=["accuracy"], accuracy=0.93)
    (out / "results/00_intro/curve.png").write_bytes(PNG)
    _results(out, "results/01_words/results.json", headline=["words", "throughput", "label"], words=3,
             label="a|b *c* <d> {ref}`e`",
             throughput={"workers=0": 900, "workers=2": None})
    _results(out, "results/04_xla/results.json", headline=["best_workers", "compiles"], best_workers=2,
             compiles=None, xla_ran=False)
    _results(out, "xla/results/04_xla/results.json", headline=["best_workers", "compiles"], best_workers=0,
             compiles=3, xla_ran=True, device="xla",
             versions={"python": "3.11.7", "torch": "2.9.0", "torch_xla": "2.9.0"})
    # The Chinese edition: the zh lane's runs of two notebooks (notebooks/zh/, executed into zh/).
    _notebook(out / "zh/executed/00_intro.ipynb", _md(sync.badges_source("zh/00_intro", settings), tags=["badges"]),
              _md("# 00 · 入门\n\n为什么有这个笔记本。"), _code("plot()", image, table))
    _notebook(out / "zh/executed/01_words.ipynb", _md("# 01 · 词语"), _md(ZH_SENTENCE))
    _results(out, "zh/results/00_intro/results.json", headline=["accuracy"], accuracy=0.93)
    _results(out, "zh/results/01_words/results.json", headline=["words"], words=3)
    runs = [_run("00_intro"), _run("01_words", wall_s=40.0, budget_s=35), _run("03_broken", status="failed",
            results=False, error="ValueError: boom"), _run("04_xla"), _run("04_xla", lane="xla", budget_s=None),
            _run("00_intro", lane="zh"), _run("01_words", lane="zh")]
    (out / "summary.json").write_text(json.dumps({"built_at": "2026-12-03T06:00:00+00:00",
                                                  "machine": {"logical_cpus": 2, "usable_cpus": None},
                                                  "notebooks": runs}))
    (root / "README.md").write_text("# Course\n\n| # | notebook | you leave able to |\n|---|---|---|\n"
                                    "| 00 | [intro](notebooks/00_intro.ipynb) | start |\n"
                                    "| 02 | [planned](notebooks/02_planned.ipynb) | later |\n\nAfter the table.\n")
    return out


def text_of(html: str) -> str:
    body = re.sub(r"<(script|style)\b.*?</\1>", " ", html, flags=re.S)
    return unescape(re.sub(r"<[^>]+>", " ", body))


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("site")
    out = fake_course(root)
    index, seconds = course_site.build(out, repo_root=root)
    print(f"site build: {seconds:.1f} s")
    return out / "site"


PAGES = ["00_intro", "01_words", "03_broken", "04_xla", "04_xla-main-env"]


def test_every_notebook_has_a_page_with_its_outputs(site):
    for name in PAGES:
        assert (site / "notebooks" / f"{name}.html").exists(), name
    page = (site / "notebooks/00_intro.html").read_text()
    images = re.findall(r'<img[^>]+src="([^"]+)"', page)
    assert images and all((site / "notebooks" / src).resolve().is_file() for src in images)
    assert re.search(r"<table.*accuracy.*0\.93.*</table>", page, re.S)
    broken = (site / "notebooks/03_broken.html").read_text()
    assert "ValueError" in text_of(broken) and "admonition warning" in broken  # the failed run is flagged on top


# myst-nb's rendering of a `hide-cell` cell: the whole cell inside a <details> (closed: no `open`), its summary the
# cell's prompt (build/solutions.py sets it in the cell's `mystnb` metadata).
SOLUTION_CELL = re.compile(r'<div class="cell tag_solution tag_hide-cell[^"]*">\s*<details class="[^"]*\bhide '
                           r'above-input\b[^"]*">\s*<summary[^>]*>\s*<p class="collapsed[^"]*">Show the worked '
                           r'solution</p>.*?</details>', re.S)


def test_each_solution_is_collapsed_under_its_exercise(site):
    """Each solution follows its exercise's item, inside a closed toggle; the list keeps its numbers."""
    page = (site / "notebooks/00_intro.html").read_text()
    toggles = SOLUTION_CELL.findall(page)
    assert len(toggles) == 2 and "6 x 7 is 42." in toggles[0]  # the solution and its output, both collapsed
    assert not re.search(r"<details[^>]*\bopen\b", page)
    first, second = page.index("What is 6 x 7?"), page.index("And 6 x 8?")
    assert first < page.index(toggles[0]) < second < page.index(toggles[1]) < page.index('id="next"')
    assert re.search(r'<ol class="arabic[^"]*" start="2">\s*<li><p><strong>Modify', page)  # numbered as listed


def test_notebook_04_page_is_the_xla_lane_run_and_the_main_run_is_kept(site):
    xla, main = ((site / f"notebooks/{name}.html").read_text() for name in ("04_xla", "04_xla-main-env"))
    assert "compiled on xla:0" in xla and "XLA-lane" in text_of(xla) and "torch_xla 2.9.0" in text_of(xla)
    assert "lane: main environment" in main and "compiled on xla:0" not in main
    assert 'href="04_xla-main-env.html"' in xla and 'href="04_xla.html"' in main


def test_launch_links_point_at_the_configured_repository(site):
    settings = sync.course_settings()
    for name in PAGES:
        page = (site / "notebooks" / f"{name}.html").read_text()
        links = sync.launch_links(name.removesuffix("-main-env"), settings)
        assert links["colab"].startswith(f"https://colab.research.google.com/github/"
                                         f"{settings['repo'].removeprefix('https://github.com/')}/blob/"
                                         f"{settings['branch']}/notebooks/")
        for url in links.values():
            assert page.count(f'href="{url}"') >= 2, (name, url)  # the page's buttons and the header's menu
        assert "colab-badge.svg" not in page  # the badge images would be fetched from the internet


def test_measurements_page_lists_every_run_and_no_none(site):
    page = text_of((site / "measurements.html").read_text())
    for title in ("00 · Intro", "01 · Words", "03 · Broken", "04 · XLA"):
        assert title in page
    assert page.count("ok") >= 4 and "failed" in page and "ValueError: boom" in page
    assert "40.0 s of 35 s" in page and "over budget" in page and "3.0 s of 10 s" in page
    assert re.search(r"machine load\s+5\.2", page)  # what the timings competed with
    assert "XLA lane" in page and "not run" in page  # compiles: measured in the XLA lane only
    assert "workers=0: 900" in page and "workers=2" not in page  # a dict entry that did not run is left out
    assert "torch_xla 2.9.0" in page and "logical CPUs 2" in page
    assert "a|b *c* <d> {ref}`e`" in page  # measured text is shown as it is, never parsed as markup
    assert (site / "_images" / "curve.png").exists() or "curve.png" in page
    for name in ("measurements.html", "index.html"):
        assert not re.search(r"\bNone\b", text_of((site / name).read_text())), name


def test_front_page_has_the_readme_table_and_planned_links_are_text(site):
    index = (site / "index.html").read_text()
    assert 'href="notebooks/00_intro.html"' in index and "Four ways to use it" in text_of(index)
    assert re.search(r"profile\s+smoke\s*;\s*device\s+cpu\s*,\s*xla\s*;\s*XLA lane and main environment;\s+2 logical",
                     text_of(index))  # how this build ran, from its results
    assert "planned" in text_of(index) and "02_planned" not in index
    intro = (site / "notebooks/00_intro.html").read_text()
    assert "02 · Planned" in text_of(intro) and "02_planned" not in intro
    assert 'href="01_words.html"' in intro


def test_nothing_is_fetched_from_the_internet(site):
    fetched = re.compile(r"<(?:script|img|iframe)[^>]+src=\"(?:https?:)?//|<link[^>]+rel=\"(?:stylesheet|preload)\""
                         r"[^>]+href=\"(?:https?:)?//|@import\s+url\(\s*['\"]?(?:https?:)?//")
    rooted = re.compile(r"(?:href|src)=\"/(?!/)")  # a link from the server root breaks on file:// and in subfolders
    for path in site.rglob("*"):
        if path.suffix in (".html", ".css"):
            assert not fetched.search(path.read_text()), path
        if path.suffix == ".html":
            assert not rooted.search(path.read_text()), path


def test_staged_notebooks_keep_no_absolute_build_paths(tmp_path):
    """papermill's input/output paths leave the metadata; its parameters and injected-parameters cell say the build
    machine's folders relative to the repository (or the build folder); other absolute paths are kept."""
    out = fake_course(tmp_path)
    executed = out / "executed/01_words.ipynb"
    nb = nbformat.read(executed, as_version=4)
    nb.metadata["papermill"] = {"input_path": str(tmp_path / "notebooks/01_words.ipynb"),
                                "output_path": str(executed), "duration": 1.5,
                                "parameters": {"output_dir": str(out / "results/01_words"), "seed": 3}}
    injected = _code(f'# Parameters\noutput_dir = "{out}/results/01_words"\ncache = \'{out}\'\n'
                     'data = "/opt/elsewhere/x.csv"\nseed = 3\n')
    injected.metadata["tags"] = ["injected-parameters"]
    nb.cells.insert(1, injected)
    written = nbformat.v4.new_output("stream", name="stdout", text=f"Writing {out}/results/01_words/train.py\n")
    script = _code("%%writefile {output_dir}/train.py\nprint('hi')\n", written)
    nb.cells.insert(2, script)
    nbformat.write(nb, executed)
    for repo_root, prefix in ((tmp_path, "out/"), (tmp_path / "elsewhere", "")):  # the build folder outside the repo
        src = tmp_path / "staged"
        course_site.stage(out, src, repo_root=repo_root)
        staged = nbformat.read(src / "notebooks/01_words.ipynb", as_version=4)
        assert staged.metadata.papermill == {"duration": 1.5,
                                             "parameters": {"output_dir": f"{prefix}results/01_words", "seed": 3}}
        cell = next(c for c in staged.cells if "injected-parameters" in c.metadata.get("tags", []))
        assert cell.source == (f'# Parameters\noutput_dir = "{prefix}results/01_words"\n'
                               f"cache = '{prefix.rstrip('/') or '.'}'\n"
                               'data = "/opt/elsewhere/x.csv"\nseed = 3\n')
        script = next(c for c in staged.cells if c.source.startswith("%%writefile"))
        assert script.outputs[0].text == f"Writing {prefix}results/01_words/train.py\n"
        assert str(tmp_path) not in (src / "notebooks/01_words.ipynb").read_text()


def test_a_broken_reference_fails_the_build(tmp_path):
    """A link to a notebook that is not there (its number is), a missing image, an unknown page: each one fails."""
    out = fake_course(tmp_path)
    nb = nbformat.read(out / "executed/01_words.ipynb", as_version=4)
    nb.cells += [_md("[typo](00_intro_typo.ipynb)"), _md("![plot](missing.png)"), _md("{doc}`no_such_page`")]
    nbformat.write(nb, out / "executed/01_words.ipynb")
    with pytest.raises(course_site.SiteBuildError) as failed:
        course_site.build(out, repo_root=tmp_path)
    said = str(failed.value)
    print(said)
    for culprit in ("00_intro_typo", "missing.png", "no_such_page"):  # --keep-going: every warning is reported
        assert re.search(rf"01_words\.ipynb.*{re.escape(culprit)}", said), culprit


def test_make_course_path_runs_the_xla_lane_and_shows_it_as_the_notebook_page(tmp_path, monkeypatch):
    """run_course.main with --xla-python (what `make course` passes): both lanes run, the site shows the XLA one."""
    from build import run_course as runner

    monkeypatch.delenv("PJRT_DEVICE", raising=False)
    notebooks, out = tmp_path / "notebooks", tmp_path / "out"
    notebooks.mkdir()
    name = runner.XLA_LANE[0]
    nbformat.write(nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell('output_dir = ""', metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell("import json, os, pathlib\npjrt = os.environ.get('PJRT_DEVICE')\n"
                                  "print(f'PJRT_DEVICE is {pjrt}')\n"
                                  "pathlib.Path(output_dir, 'results.json').write_text(json.dumps({'pjrt': pjrt}))")],
        metadata={"kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"}}),
        notebooks / f"{name}.ipynb")
    assert runner.main(["--notebooks", str(notebooks), "--out", str(out), "--xla-python", sys.executable]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert [(r["lane"], r["status"], r["budget_s"]) for r in summary["notebooks"]] == [
        ("main", "ok", runner.BUDGET_S[name[:2]]), ("xla", "ok", None)]
    assert json.loads((out / summary["notebooks"][1]["results"]).read_text()) == {"pjrt": "CPU"}
    assert summary["site"]["build_s"] > 0 and summary["notebooks"][0]["load_1m"] >= 0
    page, kept = (text_of((out / "site/notebooks" / f"{stem}.html").read_text())
                  for stem in (name, f"{name}-main-env"))
    assert "PJRT_DEVICE is CPU" in page and "PJRT_DEVICE is None" in kept
    missing = runner.run_xla_lane(tmp_path / "no-python", [notebooks / f"{name}.ipynb"], tmp_path / "out2", {})
    assert missing[0].status == "failed" and "XLA lane did not run" in missing[0].error


# ---- the browser check: headless Chromium driven over the DevTools protocol on a pipe (no network, no port) ----

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class Browser:
    """Just enough of the Chrome DevTools Protocol: open a page, collect its errors, evaluate JavaScript."""

    def __init__(self, profile: Path):
        to_chrome, self._write = os.pipe()
        self._read, from_chrome = os.pipe()

        def wire() -> None:  # chromium reads commands on fd 3 and writes replies on fd 4
            os.dup2(to_chrome, 3)
            os.dup2(from_chrome, 4)
            os.set_inheritable(3, True)
            os.set_inheritable(4, True)

        self.proc = subprocess.Popen([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                      "--disable-dev-shm-usage", "--remote-debugging-pipe",
                                      f"--user-data-dir={profile}", "about:blank"],
                                     pass_fds=(3, 4), preexec_fn=wire, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        os.close(to_chrome)
        os.close(from_chrome)
        self._buffer, self._id, self.events = b"", 0, []
        try:
            target = self.call("Target.createTarget", url="about:blank")["targetId"]
            self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
            for domain in ("Runtime", "Log", "Page", "Network"):
                self.call(f"{domain}.enable", session=True)
        except BaseException:
            self.close()
            raise

    def _message(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            ready, _, _ = select.select([self._read], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError("chromium did not answer")
            chunk = os.read(self._read, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed the pipe")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method: str, session: bool = False, timeout: float = 30, **params) -> dict:
        self._id += 1
        message = {"id": self._id, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._message(deadline)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == method for e in self.events):
            self.events.append(self._message(deadline))

    def open(self, url: str) -> list[str]:
        """Load `url`; return its errors: exceptions, console.error, failed loads, error log entries."""
        self.events.clear()
        self.call("Page.navigate", session=True, url=url)
        self.wait_for("Page.loadEventFired")
        self.evaluate("new Promise(r => setTimeout(r, 500))")  # let deferred scripts run
        errors = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.exceptionThrown":
                errors.append(params["exceptionDetails"].get("exception", {}).get("description", str(params)))
            elif method == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
                errors.append(" ".join(str(a.get("value", a.get("description"))) for a in params["args"]))
            elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
                errors.append(f"{params['entry']['text']} {params['entry'].get('url', '')}")
            elif method == "Network.loadingFailed" and not params.get("canceled"):
                errors.append(f"load failed: {params.get('errorText')}")
        return errors

    def evaluate(self, expression: str):
        result = self.call("Runtime.evaluate", session=True, expression=expression, awaitPromise=True,
                           returnByValue=True)
        return result["result"].get("value")

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=5)
        except (TimeoutError, RuntimeError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._read)
        os.close(self._write)


@pytest.mark.skipif(CHROMIUM is None, reason="no headless Chromium here (Debian: apt-get install chromium)")
def test_pages_render_without_console_errors_and_search_finds_notebook_01(site, tmp_path):
    browser = Browser(tmp_path / "profile")
    try:
        for page in ("index.html", "notebooks/00_intro.html", "measurements.html"):
            assert browser.open((site / page).as_uri()) == [], page
        assert browser.evaluate("document.title").endswith("Accelerate on free notebooks")
        browser.open((site / "search.html").as_uri() + f"?q={SEARCH_WORD}")
        found, deadline = [], time.monotonic() + 20  # the index loads asynchronously; a busy machine is slow
        while not found and time.monotonic() < deadline:
            time.sleep(0.1)
            found = browser.evaluate("Array.from(document.querySelectorAll('#search-results a'), a => a.href)")
        assert any(href.split("#")[0].endswith("notebooks/01_words.html") for href in found), found
        # The Chinese edition: a word from the middle of a sentence finds its page.
        assert browser.open((site / "zh" / "index.html").as_uri()) == []
        browser.open((site / "zh" / "search.html").as_uri() + f"?q={ZH_SEARCH_WORD}")
        found, deadline = [], time.monotonic() + 20
        while not found and time.monotonic() < deadline:
            time.sleep(0.1)
            found = browser.evaluate("Array.from(document.querySelectorAll('#search-results a'), a => a.href)")
        assert any(href.split("#")[0].endswith("zh/notebooks/01_words.html") for href in found), found
    finally:
        browser.close()


def test_the_zh_edition_has_its_pages_and_a_language_switch_on_every_page(site):
    zh = site / "zh"
    for page in ("index.html", "notebooks/00_intro.html", "notebooks/01_words.html", "measurements.html",
                 "glossary.html", "claims.html"):
        assert (zh / page).is_file(), page
    assert "每个进程都保存一份模型副本" in (zh / "notebooks/01_words.html").read_text()
    assert "03_broken" not in (zh / "measurements.html").read_text()  # the zh lane's runs only
    assert "本次构建" in text_of((zh / "measurements.html").read_text())  # the builder's words in Chinese
    assert "zh/00_intro.ipynb" in (zh / "notebooks/00_intro.html").read_text()  # launch links: the zh notebook
    for edition, other in ((site, "中文"), (zh, "English")):
        for html in sorted(edition.rglob("*.html")):
            if zh in html.parents and edition is site or "_static" in html.parts or html.name in ("search.html",
                                                                                             "genindex.html"):
                continue
            links = re.findall(r'<a href="([^"]+)"[^>]*title="' + other + '"', html.read_text())
            links += re.findall(r'<a href="([^"]+)"[^>]*>\s*(?:<[^>]+>\s*)*' + other, html.read_text())
            assert links, f"{html.relative_to(site)}: no switch to {other}"
            target = (html.parent / links[0]).resolve()
            assert target.is_file(), f"{html.relative_to(site)}: {links[0]} does not exist"
    assert (site / "notebooks/00_intro.html").read_text().count('href="../zh/notebooks/00_intro.html"')
    assert (zh / "notebooks/00_intro.html").read_text().count('href="../../notebooks/00_intro.html"')


def test_the_zh_search_index_has_words_cut_from_the_middle_of_a_sentence(site):
    text = (site / "zh" / "searchindex.js").read_text()  # Search.setIndex({...}): JSON, its non-ASCII escaped
    index = json.loads(text[text.index("(") + 1:text.rindex(")")])
    assert ZH_SEARCH_WORD in index["terms"], "jieba did not cut the word out of the sentence"
    found = index["terms"][ZH_SEARCH_WORD]  # a page's number, or a list of them
    assert "notebooks/01_words" in [index["docnames"][i] for i in (found if isinstance(found, list) else [found])]
    assert ZH_SENTENCE[:8] not in index["terms"]  # the sentence itself is not one term
