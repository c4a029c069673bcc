"""Which Pythons the course runs on: 3.11 tested here, 3.12 (Kaggle) and 3.13 (Colab) expected to work.

Python 3.13 cannot be installed on the course's machines, so what can be checked without it is: nothing in the
package, the build scripts, the tests or the notebooks imports a module that 3.13 removed (PEP 594's dead
batteries, and lib2to3), and the stated versions agree with each other.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib

import nbformat
import pytest
from conftest import NOTEBOOK_DIR, ROOT
from packaging.specifiers import SpecifierSet

from build.wheelhouse import load_images

# Removed in Python 3.13: PEP 594 (https://peps.python.org/pep-0594/) and lib2to3 (What's New in Python 3.13).
REMOVED_IN_313 = frozenset({"aifc", "audioop", "cgi", "cgitb", "chunk", "crypt", "imghdr", "mailcap", "msilib",
                            "nis", "nntplib", "ossaudiodev", "pipes", "sndhdr", "spwd", "sunau", "telnetlib", "uu",
                            "xdrlib", "lib2to3"})
SOURCES = ("shared", "build", "tests")


def removed_imports(source: str, where: str) -> list[str]:
    """`where:line: module` for every import of a module that Python 3.13 removed, `importlib.import_module` and
    `__import__` with a literal name included."""
    found = []
    for node in ast.walk(ast.parse(source, where)):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and ((isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                   or (isinstance(node.func, ast.Name) and node.func.id in ("__import__", "import_module")))):
            names = [node.args[0].value]
        found += [f"{where}:{node.lineno}: {name}" for name in names if name.split(".")[0] in REMOVED_IN_313]
    return found


def notebook_code(path) -> str:
    """A notebook's code cells as one Python source, IPython magics and shell lines commented out."""
    cells = [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
    lines = []
    for cell in cells:
        magic = cell.lstrip().startswith("%%")
        lines += ["# " + line if magic or line.lstrip().startswith(("%", "!")) else line
                  for line in cell.splitlines()]
        first = cell.lstrip().split("\n", 1)[0]
        if first.startswith("%%writefile") and first.endswith(".py"):  # a Python script: check it too (not YAML)
            lines += cell.split("\n", 1)[1].splitlines()
    return "\n".join(lines) + "\n"


def test_the_check_finds_each_removed_import():
    source = ("import cgi\nimport os, telnetlib\nfrom lib2to3 import pytree\nfrom xml import sax\n"
              "import importlib\nimportlib.import_module('imghdr')\n__import__('uu')\nfrom . import pipes\n")
    assert removed_imports(source, "x.py") == ["x.py:1: cgi", "x.py:2: telnetlib", "x.py:3: lib2to3",
                                               "x.py:6: imghdr", "x.py:7: uu"]


def test_no_source_imports_what_python_313_removed():
    files = sorted(p for folder in SOURCES for p in (ROOT / folder).rglob("*.py"))
    assert len(files) > 20
    found = [hit for p in files for hit in removed_imports(p.read_text(), str(p.relative_to(ROOT)))]
    assert found == []


@pytest.mark.parametrize("name", sorted(p.stem for p in NOTEBOOK_DIR.glob("*.ipynb")))
def test_no_notebook_imports_what_python_313_removed(name):
    path = NOTEBOOK_DIR / f"{name}.ipynb"
    assert removed_imports(notebook_code(path), path.name) == []


def test_stated_python_versions_agree():
    """pyproject's classifiers name 3.11 (tested), 3.12 and 3.13 (the images'); requires-python admits them all."""
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    stated = sorted(c.rsplit(" :: ", 1)[1] for c in meta["classifiers"]
                    if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c))
    images = {".".join(i.python.split(".")[:2]) for i in load_images(ROOT / "platforms" / "images.toml").values()}
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert set(stated) == images | {here}
    assert all(SpecifierSet(meta["requires-python"]).contains(f"{v}.0") for v in stated)
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Platform image lanes"):readme.index("## Layout")]
    assert f"Python {here}" in section and all(v in section for v in images)
