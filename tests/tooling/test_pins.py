"""One source of truth for versions: constraints.txt, followed by the Makefile, CI and environment.yml."""

from __future__ import annotations

import re
import tomllib

from conftest import ROOT
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version


def pins() -> dict[str, Version]:
    found = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: {line!r} is not an exact pin"
            found[canonicalize_name(name)] = Version(version)
    return found


def test_torch_is_pinned_to_the_build_on_disk():
    assert pins()["torch"] == Version("2.13.0")


def test_every_dependency_is_pinned_within_its_range():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = project["dependencies"] + [r for extra in project["optional-dependencies"].values() for r in extra]
    pinned = pins()
    for text in requirements:
        req = Requirement(text)
        name = canonicalize_name(req.name)
        assert name in pinned, f"{req.name} is not pinned in constraints.txt"
        assert req.specifier.contains(pinned[name], prereleases=True), f"{name}=={pinned[name]} is outside {req}"


def test_installers_follow_the_constraints():
    makefile = (ROOT / "Makefile").read_text()
    installs = [line for line in makefile.splitlines() if "pip install" in line]
    assert installs and all("-c constraints.txt" in line or "-c $(XLA_VENV)/constraints.txt" in line
                            for line in installs)
    # The XLA lane's file is constraints.txt with its torch pin replaced by the pair torch_xla needs.
    xla_constraints = ("{ grep -v '^torch==' constraints.txt; printf '%s\\n' $(XLA_PINS); }"
                       " > $(XLA_VENV)/constraints.txt")
    assert xla_constraints in makefile
    assert re.search(r"^XLA_PINS := torch==2\.9\.0 torch_xla==2\.9\.0$", makefile, re.M)
    # make test: every environment built first (side by side), then every lane, in turn
    assert re.search(r"^test:\n\t\$\(MAKE\) -j3 venvs\n\t\$\(MAKE\) test-main test-xla test-images$", makefile, re.M)
    assert re.search(r"^venvs: \$\(STAMP\) \$\(XLA_STAMP\) \$\(IMAGE_STAMPS\)$", makefile, re.M)
    env = (ROOT / "environment.yml").read_text()
    assert "- -c constraints.txt" in env and "- -e .[hub,nlp,smoke-bert,dev,site]" in env
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_python_versions_agree():
    requires = SpecifierSet(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"])
    conda_python = re.search(r"- python=(\d+\.\d+)", (ROOT / "environment.yml").read_text()).group(1)
    assert requires.contains(Version(conda_python))


def test_readme_names_the_two_commands():
    readme = (ROOT / "README.md").read_text()
    assert "make course" in readme and "make test" in readme
