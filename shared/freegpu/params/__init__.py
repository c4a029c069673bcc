"""Every notebook's parameter checks, behind one call in the cell after its `parameters` cell.

    parameters, out = check_parameters(NOTEBOOK, globals())

The Chinese edition (notebooks/zh/) calls `check_parameters(NOTEBOOK, globals(), language="zh")`: from then on
freegpu prints in Chinese, the check errors included. Each notebook has a module here, named after it without its
number (`01_mnist_migration` -> `mnist_migration`),
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

from ..checks import check_output_dir
from ..i18n import set_language, tr

__all__ = ["check_parameters", "rules_of"]


def rules_of(notebook: str) -> ModuleType:
    """The module that holds `notebook`'s `NAMES` and `check`."""
    number, _, name = notebook.partition("_")
    if not (number.isdigit() and name):
        raise ValueError(f"notebook {notebook!r} is not named like '01_mnist_migration'")
    return importlib.import_module(f"{__name__}.{name}")


def check_parameters(notebook: str, namespace: Mapping[str, Any], language: str | None = None
                     ) -> tuple[dict[str, Any], Path]:
    """Check every parameter of `notebook` as found in `namespace` (the notebook's `globals()`).

    `language` ("en" or "zh"), where given, is the language freegpu prints in from now on (`freegpu.i18n`);
    without it, FREEGPU_LANGUAGE decides (English where unset).
    Returns the parameters as a dict (what `start_run` records with the results) and the output folder, created
    if missing, probed for writing, and refused if another notebook's run owns it.
    """
    if language is not None:
        set_language(language)  # first: the checks below explain a bad value in this language
    rules = rules_of(notebook)
    missing = [name for name in rules.NAMES if name not in namespace]
    if missing:
        raise NameError(tr("parameter(s) {names} not defined: run the parameters cell first").format(
            names=", ".join(missing)))
    parameters = {name: namespace[name] for name in rules.NAMES}
    rules.check(parameters)
    return parameters, check_output_dir(parameters["output_dir"], notebook)
