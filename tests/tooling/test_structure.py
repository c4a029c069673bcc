"""The notebooks keep the course skeleton and the package its rule (README, "Layout"); checked without a kernel."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import json
import re

import nbformat
import papermill
import pytest
from conftest import NOTEBOOK_DIR, NOTEBOOK_NAMES, ROOT

import freegpu
from build import i18n, sync_notebooks

COURSE = ["00_environment_check", "01_mnist_migration", "02_mixed_precision", "03_memory_tricks",
          "04_tpu_data_loaders", "05_bert_finetune", "06_kaggle_commit_workflow",
          "07_beyond_one_machine", "08_keep_your_work"]
ENDING = ["## What you measured", "## Recap", "## Exercises", "## Next"]
PLATFORM_PATHS = re.compile(r"/content\b|/kaggle\b")


def load(name: str):
    return nbformat.read(NOTEBOOK_DIR / f"{name}.ipynb", as_version=4)


def code(nb, skip_tags=("setup",)) -> str:
    return "\n".join(c.source for c in nb.cells if c.cell_type == "code"
                     and not set(c.metadata.get("tags", [])) & set(skip_tags))


def test_notebook_names_are_the_course_names():
    assert NOTEBOOK_NAMES, "no notebooks found"
    assert set(NOTEBOOK_NAMES) <= set(COURSE)


def test_notebooks_are_as_built():
    """Badges, setup cells, no outputs or execution counts: what build/sync_notebooks.py writes."""
    assert sync_notebooks.main(["--check"]) == 0


@pytest.mark.parametrize("name", NOTEBOOK_NAMES)
def test_skeleton(name):
    nb = load(name)
    badges, title, setup, params = nb.cells[:4]
    assert "badges" in badges.metadata["tags"] and f"notebooks/{name}.ipynb)" in badges.source
    assert "colab.research.google.com/github/" in badges.source and "kaggle.com/kernels/welcome" in badges.source
    assert title.cell_type == "markdown" and title.source.startswith(f"# {name[:2]} · ")
    for part in ("**You will learn**", "**Prerequisites**", "**Runs on**"):
        assert part in title.source
    assert "setup" in setup.metadata["tags"] and setup.cell_type == "code"
    assert params.metadata.get("tags") == ["parameters"]
    assert sum("parameters" in c.metadata.get("tags", []) for c in nb.cells) == 1
    markdown = [c.source for c in nb.cells if c.cell_type == "markdown"]
    headings = [line for src in markdown for line in src.splitlines() if line.startswith("## ")]
    positions = [next(i for i, h in enumerate(headings) if h.startswith(e)) for e in ENDING]
    assert positions == sorted(positions), f"{name}: ending out of order: {headings}"
    steps = [h for h in headings[: positions[0]] if re.match(r"## \d+\. ", h)]
    assert 3 <= len(steps) <= 6, f"{name}: {len(steps)} numbered steps"


@pytest.mark.parametrize("name", NOTEBOOK_NAMES)
def test_parameters_have_types_and_help(name):
    nb = load(name)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    assigned = [n.target.id for n in ast.parse(cell.source).body if isinstance(n, ast.AnnAssign)]
    assert len(assigned) == len(cell.source.strip().splitlines()), "one typed assignment per line"
    # What `papermill --help-notebook` shows; a line it cannot parse (';' or '=' in a comment) goes missing.
    inferred = papermill.inspect_notebook(str(NOTEBOOK_DIR / f"{name}.ipynb"))
    assert list(inferred) == assigned
    assert all(p["help"] and p["inferred_type_name"] != "None" for p in inferred.values())
    assert inferred["profile"]["default"] == '"auto"' and inferred["output_dir"]["default"] == '""'


ONE_CALL_CHECKS = NOTEBOOK_NAMES  # every notebook checks its parameters with one call


@pytest.mark.parametrize("name", ONE_CALL_CHECKS)
def test_parameters_are_checked_by_one_call(name):
    """The cell after `parameters` checks them all with `check_parameters(NOTEBOOK, globals())`; the names it
    checks and records are exactly the parameters papermill finds, in their order."""
    from freegpu.params import rules_of

    nb = load(name)
    index = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
    check = nb.cells[index + 1].source
    assert "parameters, out = check_parameters(NOTEBOOK, globals())" in check, name
    assert len([line for line in check.splitlines() if line.strip()]) <= 4, name
    inferred = papermill.inspect_notebook(str(NOTEBOOK_DIR / f"{name}.ipynb"))
    assert list(rules_of(name).NAMES) == list(inferred)


@pytest.mark.parametrize("name", NOTEBOOK_NAMES)
def test_code_hygiene(name):
    source = code(load(name))
    assert not PLATFORM_PATHS.search(source), "platform paths belong in freegpu.platform"
    assert "import *" not in source and "os._exit" not in source
    assert "../" not in source, "no paths relative to the repository layout"


def test_platform_paths_only_in_platform_module():
    for path in (ROOT / "shared" / "freegpu").glob("*.py"):
        if path.name != "platform.py":
            assert not PLATFORM_PATHS.search(path.read_text()), path.name


def test_every_public_helper_is_used():
    """No dead helpers: each name in a module's __all__ is used by a notebook, another module or a build script.

    Dataclasses and exceptions are exempt: they are what the helpers return (read through attributes) or raise.
    """
    notebooks = "\n".join(code(load(n)) for n in NOTEBOOK_NAMES)
    package = {p.stem: p.read_text() for p in (ROOT / "shared" / "freegpu").glob("*.py")}
    rules = [p.read_text() for p in (ROOT / "shared" / "freegpu" / "params").glob("*.py")]  # the check cells' rules
    for module_name in freegpu.__all__:
        if module_name.startswith("__"):
            continue
        module = importlib.import_module(f"freegpu.{module_name}")
        others = "\n".join([text for stem, text in package.items() if stem not in (module_name, "__init__")]
                           + rules + [p.read_text() for p in (ROOT / "build").glob("*.py")])
        for symbol in module.__all__:
            obj = getattr(module, symbol)
            if dataclasses.is_dataclass(obj) or (isinstance(obj, type) and issubclass(obj, Exception)):
                continue
            used = re.search(rf"\b{symbol}\b", notebooks) or re.search(rf"\b{symbol}\b", others)
            assert used, f"freegpu.{module_name}.{symbol} is used nowhere"


def test_no_committed_outputs():
    for name in NOTEBOOK_NAMES:
        raw = json.loads((NOTEBOOK_DIR / f"{name}.ipynb").read_text())
        for cell in raw["cells"]:
            if cell["cell_type"] == "code":
                assert cell["outputs"] == [] and cell["execution_count"] is None, name


def test_setup_cell_is_short_and_links_to_troubleshooting():
    """The setup cell fits the lesson-first budget; its error links to a page that exists in this repository."""
    sync = sync_notebooks
    settings = sync.course_settings()
    assert (ROOT / sync.TROUBLESHOOTING).is_file()
    for name in NOTEBOOK_NAMES:
        setup = load(name).cells[2].source
        assert len([line for line in setup.splitlines() if line.strip()]) <= 11, name
        assert f"{settings['repo']}/blob/{settings['branch']}/{sync.TROUBLESHOOTING}" in setup
        extras = settings["extras"][name]
        assert all(f'"{sync.EXTRA_MODULES[e]}"' in setup for e in extras)  # an extra's module missing installs too


# The package is installed from GitHub on Colab and Kaggle, where no checkout exists: the course tooling that
# reads notebooks/, platforms/ and build outputs lives in build/ (issue 24).
CHECKOUT_PARTS = {"notebooks", "platforms", "build"}


def package_modules() -> dict[str, ast.Module]:
    folder = ROOT / "shared" / "freegpu"
    return {str(p.relative_to(folder).with_suffix("")).replace("/", "."): ast.parse(p.read_text())
            for p in folder.rglob("*.py")}


def reads_checkout(tree: ast.Module) -> list[str]:
    """String constants (docstrings aside) that name a folder of the course checkout: on Colab none exists."""
    docstrings = {id(node) for node in i18n.docstrings(tree, english=False)}
    return [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docstrings and (node.value in CHECKOUT_PARTS or any(
                f"{part}/" in node.value for part in ("notebooks", "platforms", "build/out")))]


def test_the_package_never_reads_the_checkout():
    readers = {name for name, tree in package_modules().items() if reads_checkout(tree)}
    assert readers == set(), f"{readers} read the checkout: that belongs in build/"


PACKAGE_MAX_LINES = 2500  # issue 24: "a small helper package shared by the notebooks" (it was 5,863 lines)


def test_the_package_stays_small():
    lines = {str(p.relative_to(ROOT)): len(p.read_text().splitlines())
             for p in (ROOT / "shared" / "freegpu").rglob("*.py")}
    assert sum(lines.values()) <= PACKAGE_MAX_LINES, sorted(lines.items(), key=lambda item: -item[1])[:5]


def test_reads_checkout_finds_a_path_but_not_a_docstring():
    tree = ast.parse('"""Reads notebooks/ and platforms/."""\nsource / "platforms" / "images.toml"\n')
    assert reads_checkout(tree) == ["platforms"]


def imports_within(name: str, tree: ast.Module) -> set[str]:
    """The package modules `name` imports, at the top or inside a function."""
    found = set()
    package = name.rsplit(".", 1)[0] if "." in name else ""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package if node.level == 1 else ""
            if node.module:
                found.add(f"{base}.{node.module}".lstrip("."))
            else:
                found |= {f"{base}.{alias.name}".lstrip(".") for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("freegpu."):
            found.add(node.module.removeprefix("freegpu."))
    return found


def cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    found = set()

    def visit(node: str, path: list[str]) -> None:
        for nxt in graph.get(node, ()):
            if nxt in path:
                found.add(frozenset(path[path.index(nxt):]))
            elif len(path) < len(graph):
                visit(nxt, [*path, nxt])

    for start in graph:
        visit(start, [start])
    return found


def test_no_import_cycle_in_the_package():
    graph = {name: imports_within(name, tree) - {name} for name, tree in package_modules().items()
             if name != "__init__"}
    assert cycles(graph) == set(), [sorted(c) for c in cycles(graph)]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == {frozenset("abc")}


def _served(graph: dict[str, set[str]], roots: set[str]) -> set[str]:
    """The modules `roots` import, and what those import in turn."""
    seen, todo = set(), list(roots)
    while todo:
        name = todo.pop()
        if name in graph and name not in seen:
            seen.add(name)
            todo += graph[name]
    return seen


def test_no_package_module_serves_one_notebook_alone():
    """Issue 24: every module of the package is used by two notebooks or more (directly, or through the modules
    they import). `params/<notebook>.py` are one per notebook by design, all behind `params.check_parameters`."""
    graph = {name: imports_within(name, tree) - {name, "__init__"} for name, tree in package_modules().items()
             if name != "__init__"}  # __init__ imports every module: that is not using them
    users: dict[str, set[str]] = {name: set() for name in graph if not name.startswith("params.")}
    for notebook in COURSE:
        lines = [line.strip() for line in code(load(notebook)).split("\n") if line.lstrip().startswith("from freegpu")]
        tree = ast.parse("\n".join(lines))
        roots = imports_within("__init__", tree) | {alias.name for node in ast.walk(tree)  # from freegpu import xla
                                                    if isinstance(node, ast.ImportFrom) and node.module == "freegpu"
                                                    for alias in node.names}
        for name in _served(graph, roots) & users.keys():
            users[name].add(notebook[:2])
    alone = {name: sorted(by) for name, by in users.items() if len(by) < 2}
    assert alone == {}, f"modules that serve one notebook alone (or none): {alone}"
    assert _served({"a": {"b"}, "b": {"c"}, "d": {"a"}}, {"a"}) == {"a", "b"}  # c is not a module here


# The results contract's own table (`show_table`: the header of the measures a run shows) is the one display the
# package translates; every other `tr` is in an error the package raises or a warning it gives.
TR_DISPLAY = {("results", "markdown_table"), ("results", "show_table")}


def message_names(function: ast.FunctionDef, raised: list[ast.Raise]) -> set[str]:
    """The names a `raise` of `function` reads, and, transitively, the names their assignments read."""
    names = {n.id for r in raised for n in ast.walk(r) if isinstance(n, ast.Name)}
    assigns = [n for n in ast.walk(function) if isinstance(n, ast.Assign)]
    while True:
        more = {n.id for a in assigns if {t.id for t in a.targets if isinstance(t, ast.Name)} & names
                for n in ast.walk(a.value) if isinstance(n, ast.Name)} - names
        if not more:
            return names
        names |= more


def untranslated_prose(tree: ast.Module, module: str) -> list[str]:
    """The `tr(...)` calls of `tree` that reach neither a `raise`, an exception it returns, a `check_*` call (the
    parameter checks raise with what they are given), nor `warnings.warn`."""
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for call in ast.walk(tree):
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "tr"):
            continue
        node, callers = call, []
        while node in parents and not isinstance(node, ast.stmt):
            node = parents[node]
            callers += [getattr(node.func, "id", "")] if isinstance(node, ast.Call) else []
        statement = node
        while node in parents and not isinstance(node, ast.FunctionDef):
            node = parents[node]
        function = node if isinstance(node, ast.FunctionDef) else None
        raised = [n for n in ast.walk(function) if isinstance(n, ast.Raise)] if function else []
        if isinstance(statement, ast.Raise) or (module, getattr(function, "name", "")) in TR_DISPLAY:
            continue
        if any(name.startswith("check_") for name in callers):
            continue  # a piece of the message a parameter check raises
        value = getattr(statement, "value", None)
        if isinstance(statement, ast.Return) and isinstance(value, ast.Call) and getattr(
                value.func, "id", "").endswith("Error"):
            continue  # a helper that builds the exception its caller raises
        if isinstance(value, ast.Call) and ast.unparse(value.func) == "warnings.warn":
            continue
        if isinstance(statement, ast.Assign) and raised:
            names = {t.id for t in statement.targets if isinstance(t, ast.Name)}
            if names & message_names(function, raised):
                continue  # a piece of the message a later raise formats
        found.append(f"{module}:{call.lineno}")
    return found


def test_the_package_translates_only_its_errors():
    """The package's rule: a helper returns numbers and objects; the cell prints its own f-string, which the
    notebook's zh catalog translates. `tr` is for the errors the package raises (and its warnings)."""
    found = [hit for name, tree in package_modules().items() for hit in untranslated_prose(tree, name)]
    assert found == []
    bad = 'def describe(n):\n    return tr("{n} processes").format(n=n)\n'
    assert untranslated_prose(ast.parse(bad), "x") == ["x:2"]  # the check can fail
    ok = 'def check(n):\n    what = tr("the model")\n    raise ValueError(tr("no {what}").format(what=what))\n'
    assert untranslated_prose(ast.parse(ok), "x") == []
    assert untranslated_prose(ast.parse('def f(n):\n    check_fits_memory("n", n, 1, what=tr("x"))\n'), "x") == []
