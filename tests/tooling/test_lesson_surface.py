"""Lesson first (issues 17 and 24): every notebook reads as a lesson, and no lesson hides in the package.

Counted by the project's own `build/lesson_surface.py` (the course team's tool, same columns): non-blank lines; a
`%%writefile` cell is a script, counted apart; prose is markdown outside code blocks; `owned` is the package lines
that one notebook alone names (code moved out of sight is still the notebook's).
"""

from __future__ import annotations

import json

import nbformat
from conftest import NOTEBOOK_DIR, NOTEBOOK_NAMES, ROOT

from build import lesson_surface as surface

TARGETS = {"code": 200, "preamble": 30, "longest": 15, "over15": 0, "words": 1600, "sentence": 18.0,
           "pkg_scripts": 0, "owned": 60}
# Notebooks whose back room is not dissolved yet (issue 24), with the owned lines they may not exceed: the ceiling
# only goes down, and a notebook leaves this list once it is within the target.
OWNED_NOT_YET: dict[str, int] = {}



def test_surface_counts_like_the_team_tool(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("import os\n\nx = 1"),
        nbformat.v4.new_markdown_cell("## 1. Step\n\nOne two. Three."),
        nbformat.v4.new_code_cell("%%writefile s.py\nimport freegpu\n"), nbformat.v4.new_code_cell("a\nb\nc")])
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, path)
    found = surface.survey(str(path))
    assert {key: found[key] for key in ("code", "preamble", "longest", "words", "sentence", "pkg_scripts")} == {
        "code": 5, "preamble": 2, "longest": 3, "words": 5, "sentence": 1.7, "pkg_scripts": 1}


def test_owned_counts_what_one_notebook_alone_names(tmp_path):
    package = tmp_path / "shared" / "pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "m.py").write_text("def alone():\n    return 1\n\n\ndef both():\n    pass\n")
    paths = []
    for name, source in (("a", "from pkg.m import alone, both\nalone()"), ("b", "both()")):
        nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)]), tmp_path / f"{name}.ipynb")
        paths.append(str(tmp_path / f"{name}.ipynb"))
    assert surface.owned_lines(paths, package) == {paths[0]: 2, paths[1]: 0}


def rows() -> dict[str, dict]:
    paths = [str(NOTEBOOK_DIR / f"{name}.ipynb") for name in NOTEBOOK_NAMES]
    owned = surface.owned_lines(paths, ROOT / "shared" / "freegpu")
    return {name: {**surface.survey(path), "owned": owned[path]}
            for name, path in zip(NOTEBOOK_NAMES, paths, strict=True)}


def test_notebooks_are_within_the_lesson_first_targets():
    over = {}
    for name, found in rows().items():
        for key, limit in TARGETS.items():
            limit = OWNED_NOT_YET.get(name, limit) if key == "owned" else limit
            if found[key] > limit:
                over[f"{name} {key}"] = f"{found[key]} > {limit}"
    assert not over, json.dumps(over, indent=1)


def test_the_not_yet_list_only_shrinks():
    found = rows()
    done = [name for name in OWNED_NOT_YET if found[name]["owned"] <= TARGETS["owned"]]
    assert not done, f"{done} are within the owned target now: take them off OWNED_NOT_YET"
