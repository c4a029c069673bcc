"""The course's build tooling: scripts run from the repository root, and modules the tests import.

Each script still runs as `python build/<name>.py` (the Makefile and the developers' guide do so); run that way it
puts the repository root first on `sys.path`, so its siblings import as `build.<name>`, as the tests import them
(pytest's `pythonpath = ["."]` in pyproject.toml). Nothing here is installed: the course package is
`shared/freegpu`, and this folder exists only in a checkout.

The name `build` is also PyPA's build frontend (`python -m build`). The course never installs it; where it is
installed, the repository root comes first on the path in both ways of running, so this folder is the one
imported (tests/tooling/test_tooling.py checks which file `import build` finds).

Build outputs go to build/out/ (gitignored); `make clean` deletes them.
"""
