"""build/run_course.py: a failing notebook fails the course after the others ran, and is named."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import nbformat
from conftest import ROOT


def notebook(path, *sources):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "Python 3"}
    nb.cells = [nbformat.v4.new_code_cell(src) for src in sources]
    nb.cells[0].metadata["tags"] = ["parameters"]
    nbformat.write(nb, path)


def test_failing_notebook_is_named_and_the_others_still_run(tmp_path, capsys):
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    notebook(notebooks / "00_fails.ipynb", 'output_dir = ""', "raise ValueError('boom')")
    notebook(notebooks / "01_works.ipynb", 'output_dir = ""',
             "import json, pathlib\npathlib.Path(output_dir, 'results.json').write_text(json.dumps({'x': 1}))")
    from build import run_course as runner

    rc = runner.main(["--notebooks", str(notebooks), "--out", str(tmp_path / "out")])
    assert rc == 1
    assert "FAILED: 00_fails" in capsys.readouterr().err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())["notebooks"]
    assert [(n["name"], n["status"]) for n in summary] == [("00_fails", "failed"), ("01_works", "ok")]
    assert "ValueError: boom" in summary[0]["error"] and summary[0]["results"] is None
    assert summary[1]["results"] == "results/01_works/results.json"
    measured = (tmp_path / "out" / "site" / "measurements.html").read_text()  # the site: build/course_site.py
    assert "boom" in measured and re.search(r'<span class="pre">x</span></code></p></td>\s*<td><p>1</p>', measured)


def test_import_freegpu_is_light():
    code = "import sys, freegpu; print(sorted(m for m in ('torch', 'transformers', 'datasets', 'torch_xla', " \
           "'sklearn', 'matplotlib') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert done.stdout.strip() == "[]"
