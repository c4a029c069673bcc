#!/usr/bin/env python3
"""How each notebook reads: what a learner meets before the lesson, how long the cells are, how much prose.

Usage: python build/lesson_surface.py [notebooks/*.ipynb]  (from the project root; --json for a table)

The project's copy of the course team's tool (same columns); tests/tooling/test_lesson_surface.py holds every
notebook to the targets with it.

Counts, per notebook (non-blank lines; a %%writefile cell is a script and is counted apart):
  code      code lines outside scripts          preamble  code lines before the first "## " heading
  longest   the longest code cell outside scripts   over15  code cells longer than 15 lines
  scripts   lines of %%writefile scripts         pkg_scripts  scripts that import the course package
  words     words of markdown prose (code blocks excluded)   sentence  mean words per sentence
  owned     lines of the course package's top-level definitions that this notebook (cells and its
            notebooks/solutions/<name>.py) names and no other notebook does: code moved out of the
            notebook's sight is still the notebook's. The package is found as <dir>/<pkg>/__init__.py under
            shared/ or src/ (or --package DIR); definitions named by several notebooks are shared, not owned.
"""
import ast
import collections
import glob
import json
import pathlib
import re
import sys


def lines(src: str) -> list[str]:
    return [line for line in src.splitlines() if line.strip()]


def code_units(path: str) -> list[str]:
    """The notebook's code cells (magics dropped) and its worked solutions: what names package definitions."""
    nb = json.load(open(path, encoding="utf-8"))
    units = ["\n".join(line for line in "".join(cell["source"]).splitlines()
                       if not line.lstrip().startswith(("%", "!")))
             for cell in nb["cells"] if cell["cell_type"] == "code"]
    solution = pathlib.Path(path).parent / "solutions" / (pathlib.Path(path).stem + ".py")
    if solution.exists():
        units.append(solution.read_text(encoding="utf-8"))
    return units


def names(units: list[str]) -> set[str]:
    found = set()
    for src in units:
        try:
            tree = ast.parse(src)
        except SyntaxError:  # not Python on its own: its words stand in for its names
            found |= set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", src))
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                found.add(node.id)
            elif isinstance(node, ast.Attribute):
                found.add(node.attr)
            elif isinstance(node, ast.alias):
                found.add((node.asname or node.name).split(".")[-1])
    return found


def find_package(argv: list[str]) -> pathlib.Path | None:
    if "--package" in argv:
        return pathlib.Path(argv[argv.index("--package") + 1])
    for init in sorted(glob.glob("shared/*/__init__.py") + glob.glob("src/*/__init__.py")):
        return pathlib.Path(init).parent
    return None


def package_defs(package: pathlib.Path) -> list[tuple[str, int]]:
    """(name, lines) of every top-level function, class and constant of the package's modules."""
    defs = []
    for module in sorted(package.rglob("*.py")):
        tree = ast.parse(module.read_text(encoding="utf-8"))
        for node in tree.body:
            size = node.end_lineno - node.lineno + 1
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defs.append((node.name, size))
            elif isinstance(node, ast.Assign):
                defs += [(t.id, size) for t in node.targets if isinstance(t, ast.Name) and t.id != "__all__"]
    return defs


def owned_lines(paths: list[str], package: pathlib.Path | None) -> dict[str, int]:
    if package is None or not package.exists():
        return {p: 0 for p in paths}
    used = {p: names(code_units(p)) for p in paths}
    users = collections.Counter(name for p in paths for name in used[p])
    defs = package_defs(package)
    return {p: sum(size for name, size in defs if name in used[p] and users[name] == 1) for p in paths}


def survey(path: str) -> dict:
    nb = json.load(open(path, encoding="utf-8"))
    code, preamble, cells, scripts, pkg_scripts, prose = 0, 0, [], 0, 0, []
    seen_step = False
    for cell in nb["cells"]:
        src = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            if re.search(r"^## ", src, re.M):
                seen_step = True
            prose.append(re.sub(r"```.*?```", " ", src, flags=re.S))
            continue
        if cell["cell_type"] != "code":
            continue
        body = lines(src)
        if body and body[0].startswith("%%writefile"):
            scripts += len(body)
            pkg_scripts += bool(re.search(r"^\s*(from|import)\s+freegpu", src, re.M))
            continue
        code += len(body)
        cells.append(len(body))
        if not seen_step:
            preamble += len(body)
    text = " ".join(prose)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links: keep their words
    words = re.findall(r"[A-Za-z0-9_'`.\-]+|[\u4e00-\u9fff]", text)
    sentences = [s for s in re.split(r"[.!?。！？]+(?:\s|$)", text) if re.search(r"\w", s)]
    return {"notebook": path.split("/")[-1].removesuffix(".ipynb"), "code": code, "preamble": preamble,
            "longest": max(cells, default=0), "over15": sum(n > 15 for n in cells), "scripts": scripts,
            "pkg_scripts": pkg_scripts, "words": len(words),
            "sentence": round(len(words) / max(len(sentences), 1), 1)}


def main(argv: list[str]) -> None:
    as_json = "--json" in argv
    skip = {argv.index("--package") + 1} if "--package" in argv else set()
    paths = [a for i, a in enumerate(argv) if not a.startswith("--") and i not in skip]
    paths = paths or sorted(glob.glob("notebooks/[0-9]*.ipynb"))
    rows = [survey(p) for p in paths]
    # owned is counted among the English notebooks alone: a translation names the same definitions
    english = [p for p in paths if "/zh/" not in p]
    owned = owned_lines(english, find_package(argv))
    for row, p in zip(rows, paths, strict=True):
        row["owned"] = owned.get(p, 0)
    if as_json:
        print(json.dumps(rows, indent=1))
        return
    keys = list(rows[0]) if rows else []
    print("  ".join(f"{k:>11}" if k != "notebook" else f"{k:<28}" for k in keys))
    for r in rows:
        print("  ".join(f"{r[k]:>11}" if k != "notebook" else f"{r[k]:<28}" for k in keys))


if __name__ == "__main__":
    main(sys.argv[1:])
