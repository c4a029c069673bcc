"""Lesson first (issue 17): every notebook reads as a lesson. Counted as ../shared/tools/lesson_surface.py counts:
non-blank lines; a `%%writefile` cell is a script, counted apart; prose is markdown outside code blocks."""

from __future__ import annotations

import re

import nbformat
from conftest import NOTEBOOK_DIR, NOTEBOOK_NAMES

TARGETS = {"code": 200, "preamble": 30, "longest": 15, "words": 1600, "sentence": 18.0, "pkg_scripts": 0}
LESSON_FIRST = NOTEBOOK_NAMES  # every notebook


def surface(nb) -> dict[str, float]:
    code, preamble, cells, pkg_scripts, prose, seen_step = 0, 0, [], 0, [], False
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            seen_step = seen_step or bool(re.search(r"^## ", cell.source, re.M))
            prose.append(re.sub(r"```.*?```", " ", cell.source, flags=re.S))
            continue
        body = [line for line in cell.source.splitlines() if line.strip()]
        if body and body[0].startswith("%%writefile"):
            pkg_scripts += bool(re.search(r"^\s*(from|import)\s+freegpu", cell.source, re.M))
            continue
        code += len(body)
        cells.append(len(body))
        preamble += 0 if seen_step else len(body)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", " ".join(prose))
    words = re.findall(r"[A-Za-z0-9_'`.\-]+|[\u4e00-\u9fff]", text)
    sentences = [s for s in re.split(r"[.!?。！？]+(?:\s|$)", text) if re.search(r"\w", s)]
    return {"code": code, "preamble": preamble, "longest": max(cells, default=0), "words": len(words),
            "sentence": round(len(words) / max(len(sentences), 1), 1), "pkg_scripts": pkg_scripts}


def test_surface_counts_like_the_team_tool():
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("import os\n\nx = 1"),
        nbformat.v4.new_markdown_cell("## 1. Step\n\nOne two. Three."),
        nbformat.v4.new_code_cell("%%writefile s.py\nimport freegpu\n"), nbformat.v4.new_code_cell("a\nb\nc")])
    assert surface(nb) == {"code": 5, "preamble": 2, "longest": 3, "words": 5, "sentence": 1.7, "pkg_scripts": 1}


def test_notebooks_are_within_the_lesson_first_targets():
    over = {}
    for name in LESSON_FIRST:
        found = surface(nbformat.read(NOTEBOOK_DIR / f"{name}.ipynb", as_version=4))
        over.update({f"{name} {key}": f"{found[key]} > {limit}" for key, limit in TARGETS.items()
                     if found[key] > limit})
    assert not over
