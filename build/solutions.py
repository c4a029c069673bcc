"""Worked solutions to a notebook's exercises: read, checked, and placed under their exercises for execution.

A notebook's solutions live in `notebooks/solutions/<notebook stem>.py`: a comment header, then one block per
exercise, each starting with the line `# %% Exercise N` (N = 1, 2, ... in the order of the notebook's list):

    # Worked solutions to the exercises of notebook 01. The build runs them after the notebook, in its kernel.

    # %% Exercise 1
    ratio = results["b"] / results["a"]
    assert ratio > 1, f"the ratio is {ratio}"
    print(f"The ratio is {ratio:.2f}.")

Each block must hold code and at least one `assert` (its answer is checked, not only printed).

build/run_course.py `execute` runs a notebook that has such a file as `with_solutions` builds it: the markdown cell
with the `## Exercises` heading is split into the text before the list (the heading, any intro), then for each
exercise its list item (numbered as in the list: CommonMark starts a list at its first item's number) followed
by a code cell with its solution (tags `solution` and `hide-cell`, metadata `exercise: N`; the site shows it
collapsed under a "Show the worked solution" toggle), then what follows the list (`## Next`) as its own cell.
The committed notebook never holds a solution; only the executed one (build/out/executed/) does. A zh notebook
(notebooks/zh/) runs the same blocks with their comments and printed strings translated from its catalog
(`prepare`'s `translate`: build/i18n.py `zh_solutions`).
"""

from __future__ import annotations

import ast
import copy
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import nbformat

SOLUTIONS_DIR = "solutions"  # beside the notebooks: notebooks/solutions/<stem>.py
SOLUTION_TAGS = ["solution", "hide-cell"]  # `hide-cell`: myst-nb renders the cell inside a collapsed <details>
PROMPTS = {"code_prompt_show": "Show the worked solution", "code_prompt_hide": "Hide the worked solution"}
BLOCK = re.compile(r"^# %%(.*)$")
EXERCISE = re.compile(r"^\s*Exercise\s+(\d+)\s*$")
HEADING = re.compile(r"^##\s+(Exercises|练习)\s*$")  # 练习: the heading in a zh notebook (notebooks/zh/)
ANY_HEADING = re.compile(r"^#{1,6}\s")
ITEM = re.compile(r"^(\d{1,9})([.)])([ \t]+|$)")  # an ordered-list item at the margin: `3. text`


class SolutionsError(ValueError):
    """A solutions file that does not fit its notebook, or breaks the format; the message names the file."""


@dataclass
class Exercises:
    """A notebook's `## Exercises` cell, cut at its list: `before` (the heading and any intro), the items, `after`."""

    cell: int  # the index of the markdown cell holding the heading
    before: str
    items: list[str]
    after: str


def solutions_path(notebook: Path) -> Path:
    """Where `notebook`'s solutions live (the file may not exist); a zh notebook (notebooks/zh/) shares the English
    one's: the code is the same."""
    folder = notebook.parent.parent if notebook.parent.name == "zh" else notebook.parent
    return folder / SOLUTIONS_DIR / f"{notebook.stem}.py"


def load_solutions(path: Path) -> list[str]:
    """The blocks of a solutions file, in order (block N is exercise N's solution, without its `# %%` line).

    Raises SolutionsError, naming the file and the block, for: code before the first block, a `# %%` line that is
    not `# %% Exercise N`, numbers not 1, 2, ... in order, an empty block, a block that does not parse, a block
    without an `assert`, a file without blocks.
    """
    lines = Path(path).read_text().splitlines()
    blocks: list[list[str]] = []
    for number, line in enumerate(lines, 1):
        block = BLOCK.match(line)
        if block:
            exercise = EXERCISE.match(block[1])
            if not exercise:
                raise SolutionsError(f"{path}, line {number}: {line!r} is not a block start; write "
                                     f"'# %% Exercise {len(blocks) + 1}'")
            if int(exercise[1]) != len(blocks) + 1:
                raise SolutionsError(f"{path}, line {number}: block 'Exercise {exercise[1]}' where 'Exercise "
                                     f"{len(blocks) + 1}' was expected (blocks are numbered 1, 2, ... in order)")
            blocks.append([])
        elif blocks:
            blocks[-1].append(line)
        elif line.strip() and not line.lstrip().startswith("#"):
            raise SolutionsError(f"{path}, line {number}: code before '# %% Exercise 1' (only a comment header "
                                 "may come first)")
    if not blocks:
        raise SolutionsError(f"{path}: no '# %% Exercise 1' block")
    sources = []
    for number, block in enumerate(blocks, 1):
        source = "\n".join(block).strip("\n")
        where = f"{path}, block 'Exercise {number}'"
        try:
            tree = ast.parse(source, filename=str(path))
        except SyntaxError as exc:
            raise SolutionsError(f"{where}: does not parse ({exc.msg}, line {exc.lineno} of the block)") from exc
        if not tree.body:
            raise SolutionsError(f"{where}: is empty (write the solution, ending with an assert on its answer)")
        if not any(isinstance(node, ast.Assert) for node in ast.walk(tree)):
            raise SolutionsError(f"{where}: has no assert (check the answer the exercise asks for)")
        sources.append(source)
    return sources


def find_exercises(nb) -> Exercises | None:
    """The notebook's `## Exercises` cell cut at its numbered list; None where no markdown cell has the heading.

    The list is the ordered-list items at the margin after the heading; an item goes on over indented and blank
    lines, and ends at the next item, a heading, or unindented text after a blank line (which ends the list).
    """
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown":
            continue
        lines = cell.source.splitlines()
        start = next((i for i, line in enumerate(lines) if HEADING.match(line)), None)
        if start is None:
            continue
        at = start + 1
        while at < len(lines) and not ITEM.match(lines[at]) and not ANY_HEADING.match(lines[at]):
            at += 1
        before, items = lines[:at], []
        while at < len(lines) and ITEM.match(lines[at]):
            item = [lines[at]]
            at += 1
            while at < len(lines) and not ITEM.match(lines[at]) and not ANY_HEADING.match(lines[at]):
                line = lines[at]
                if line.strip() and not line[0].isspace() and not item[-1].strip():
                    break  # unindented text after a blank line: the list is over
                item.append(line)
                at += 1
            items.append("\n".join(item).rstrip())
        return Exercises(index, "\n".join(before).rstrip(), items, "\n".join(lines[at:]).strip("\n"))
    return None


def count_exercises(nb) -> int:
    """How many numbered items the notebook's `## Exercises` list has (0 without the heading)."""
    found = find_exercises(nb)
    return len(found.items) if found else 0


def _renumbered(item: str, number: int) -> str:
    """`item` starting with `number.`: in a cell of its own it starts a list, which begins at its own number."""
    return ITEM.sub(lambda m: f"{number}{m[2]}{m[3]}", item, count=1)


def with_solutions(nb, solutions: list[str], where: str = "the solutions file"):
    """A copy of `nb` with each solution as a code cell under its exercise (see the module's docstring).

    `where` names the solutions file in errors. Raises SolutionsError when the notebook has no `## Exercises`
    list, when the counts differ, or when a code cell follows the Exercises cell (solutions run last, after the
    notebook has saved its results).
    """
    found = find_exercises(nb)
    if found is None or not found.items:
        raise SolutionsError(f"{where}: the notebook has no numbered list under a '## Exercises' heading")
    if len(found.items) != len(solutions):
        raise SolutionsError(f"{where}: {len(solutions)} solution block(s) for {len(found.items)} exercises "
                             "(one '# %% Exercise N' block per exercise of the notebook's list)")
    later = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and i > found.cell]
    if later:
        raise SolutionsError(f"{where}: code cell {later[0] + 1} comes after the Exercises cell; the solutions run "
                             "after the notebook's last code cell, so the Exercises cell must follow every code cell")
    out = copy.deepcopy(nb)
    cell = out.cells[found.cell]
    cell.source = found.before
    cells = [cell]
    for number, (item, solution) in enumerate(zip(found.items, solutions, strict=True), 1):
        cells.append(nbformat.v4.new_markdown_cell(_renumbered(item, number)))
        cells.append(nbformat.v4.new_code_cell(solution, metadata={"tags": list(SOLUTION_TAGS), "exercise": number,
                                                                   "mystnb": dict(PROMPTS)}))
    if found.after.strip():
        cells.append(nbformat.v4.new_markdown_cell(found.after))
    out.cells[found.cell:found.cell + 1] = cells
    return out


def prepare(notebook: Path, translate: Callable[[list[str]], list[str]] | None = None):
    """The notebook to execute: `notebook` with its solutions placed, or None where it has no solutions file.

    `translate`, where given, rewrites the solution blocks first (for a zh notebook: build/i18n.py `zh_solutions`,
    which build/run_course.py passes)."""
    path = solutions_path(notebook)
    if not path.is_file():
        return None
    nb = nbformat.read(notebook, as_version=4)
    sources = load_solutions(path)
    if translate is not None:
        sources = translate(sources)
    return with_solutions(nb, sources, where=str(path))
