"""freegpu: the helper package of the course "Accelerate on free notebooks".

Importing it is cheap and works on a bare CPU machine: torch, transformers, datasets and torch_xla are imported
inside the functions that need them. Modules, by the notebook that introduces them:

- `platform`, `hardware`, `profile`, `checks`, `results`, `software`: notebook 00 (environment check)
- `data`, `models`, `launch`: notebook 01 (MNIST migration); `data` also loads notebook 05's text task
- `measure`: notebook 02 (saved activations), 03 (timings, checkpointing), 04 (loaders); `xla`: notebooks 04, 05
- `precision`: notebook 02 (mixed precision)
- `resume`: `dir_bytes`, a folder's size (notebook 00's disk check, notebook 06's output cap)
- `notebook`: `begin`, the opening of every notebook (notebook 00 shows what it finds, step by step)
- `params`: every notebook's parameter checks, behind one call in its check cell (`params.check_parameters`)
"""

from importlib.metadata import PackageNotFoundError, version

from . import (
    checks,
    data,
    hardware,
    launch,
    measure,
    models,
    notebook,
    platform,
    precision,
    profile,
    results,
    resume,
    software,
    xla,
)

try:
    __version__ = version("freegpu")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = ["checks", "data", "hardware", "launch", "measure", "models",
           "notebook", "platform", "precision", "profile", "results", "resume", "software",
           "xla", "__version__"]
