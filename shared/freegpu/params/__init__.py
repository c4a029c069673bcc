"""Every notebook's parameter checks, behind one call in the cell after its `parameters` cell.

    parameters, out = check_parameters(NOTEBOOK, globals())

Every notebook's parameters cell ends with the parameters of `COMMON` (`language`: "en", or "zh" in the Chinese
edition, notebooks/zh/: what freegpu prints from then on). Each notebook has a module here, named after it without its number (`01_mnist_migration` -> `mnist_migration`),
with `NAMES` (its parameters, in the order of its `parameters` cell; a test compares them with papermill's
`inspect_notebook`) and `check(p)`, which raises the `freegpu.checks` error naming the first bad value and what is
allowed. Nothing here imports torch: a bad value fails in well under a second, before any work. Introduced in
notebook 00.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from ..checks import check_choice, check_output_dir
from ..i18n import LANGUAGES, set_language

__all__ = ["COMMON", "check_parameters", "rules_of"]

COMMON = ("language",)  # after each notebook's own NAMES, in every parameters cell


def rules_of(notebook: str) -> ModuleType:
    """The module that holds `notebook`'s `NAMES` and `check`."""
    number, _, name = notebook.partition("_")
    if not (number.isdigit() and name):
        raise ValueError(f"notebook {notebook!r} is not named like '01_mnist_migration'")
    return importlib.import_module(f"{__name__}.{name}")


def check_parameters(notebook: str, namespace: Mapping[str, Any]) -> tuple[dict[str, Any], Path]:
    """Check every parameter of `notebook` as found in `namespace` (the notebook's `globals()`).

    Returns the parameters as a dict (what `start_run` records with the results) and the output folder, created
    if missing, probed for writing, and refused if another notebook's run owns it.
    """
    rules = rules_of(notebook)
    names = (*rules.NAMES, *COMMON)
    namespace = {"language": "en", **namespace}  # TEMPORARY while the notebooks gain the line
    missing = [name for name in names if name not in namespace]
    if missing:
        raise NameError(f"parameter(s) {', '.join(missing)} not defined: run the parameters cell first")
    parameters = {name: namespace[name] for name in names}
    check_choice("language", parameters["language"], LANGUAGES)
    set_language(parameters["language"])  # first: the checks below explain a bad value in this language
    rules.check(parameters)
    return parameters, check_output_dir(parameters["output_dir"], notebook)
