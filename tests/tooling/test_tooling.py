"""build/ is a regular package imported from the repository root: no script loads another by its file path."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import ROOT

import build

LOADER = re.compile(r"spec_from_file_location|runpy\.run_path|exec_module")


def test_import_build_is_this_folder_not_pypas_build():
    """PyPA's frontend is also called `build`; the repository root comes first on the path, so ours is found."""
    assert build.__file__ == str(ROOT / "build" / "__init__.py")
    # Run as a script, the same: the script puts the root first, and its siblings import as build.<name>.
    done = subprocess.run([sys.executable, str(ROOT / "build" / "run_course.py"), "--help"], capture_output=True,
                          text=True, cwd="/", check=True)
    assert "Execute every notebook" in done.stdout


def test_no_build_script_or_test_loads_a_script_by_path():
    found = {str(p.relative_to(ROOT)) for folder in ("build", "tests") for p in (ROOT / folder).rglob("*.py")
             if LOADER.search(p.read_text()) and p.name != "test_tooling.py"}
    # A test may run a *learner's* script as __main__ with runpy (a launch without the course package): allowed.
    found = {f for f in found if not f.startswith("tests/") or "spec_from_file_location" in (ROOT / f).read_text()}
    assert found == set(), f"{sorted(found)} load a script by path: import build.<name>"


AXES = {"notebooks", "package", "tooling", "lanes"}  # README's Layout says what each holds


def test_tests_sit_one_axis_per_folder():
    loose = sorted(p.name for p in (ROOT / "tests").glob("test_*.py"))
    assert loose == [], f"{loose}: move each into one of tests/{sorted(AXES)}"
    folders = {p.parent.name for p in (ROOT / "tests").rglob("test_*.py")}
    assert folders == AXES, folders
