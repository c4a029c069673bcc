"""Worked solutions (build/solutions.py): the loader, the splitter, and execute() running them in the kernel.

The fast tests use a small synthetic notebook in tmp_path; two start a kernel on a tiny notebook (seconds). The
course's own solutions files are checked against their notebooks without a kernel: the notebook tests run them.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from conftest import NOTEBOOK_DIR, NOTEBOOK_NAMES, ROOT

from build import solutions

# Course notebooks that must have a solutions file with one block per exercise (all of them, once written).
SOLVED = NOTEBOOK_NAMES  # every notebook: each exercise has its worked solution

EXERCISES = """## Recap

- Something learned.

## Exercises

Try these in order.

1. **Predict, then run.** Double `factor`.
   What is `value` then?
2. **Modify.** Add one to `value`.

   A second paragraph of the same item.
3. **Stretch.** Take the square.

## Next

[01 · Words](01_words.ipynb): more."""

GOOD = """# Worked solutions to the exercises of notebook 07. The build runs them after the notebook, in its kernel.

# %% Exercise 1
doubled = 21 * factor * 2
assert doubled == 2 * value, f"doubling gives {doubled}"
print(f"Doubling factor gives value {doubled}.")

# %% Exercise 2
assert value + 1 == 21 * factor + 1
print(f"One more is {value + 1}.")

# %% Exercise 3
assert value**2 == (21 * factor) ** 2
print(f"The square is {value**2}.")
"""


def _notebook(folder: Path, name: str = "07_tiny", exercises: str = EXERCISES, solved: str | None = GOOD) -> Path:
    """A tiny course notebook: parameters, one code cell writing results.json, the Exercises cell (and Next)."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "Python 3"}
    nb.cells = [nbformat.v4.new_markdown_cell("# 07 · Tiny"),
                nbformat.v4.new_code_cell('output_dir = ""\nfactor = 2', metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell("import json, pathlib\nvalue = 21 * factor\n"
                                          "pathlib.Path(output_dir, 'results.json').write_text("
                                          "json.dumps({'value': value}))"),
                nbformat.v4.new_markdown_cell(exercises)]
    path = folder / f"{name}.ipynb"
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    if solved is not None:
        solutions.solutions_path(path).parent.mkdir(exist_ok=True)
        solutions.solutions_path(path).write_text(solved)
    return path


def test_each_solution_is_a_hidden_code_cell_under_its_exercise(tmp_path):
    notebook = _notebook(tmp_path / "notebooks")
    source = nbformat.read(notebook, as_version=4)
    assert solutions.count_exercises(source) == 3
    solved = solutions.prepare(notebook)
    assert [c.source for c in solved.cells[:3]] == [c.source for c in source.cells[:3]]  # parameters untouched
    assert solved.cells[1].metadata["tags"] == ["parameters"]
    cells = solved.cells[3:]
    assert [c.cell_type for c in cells] == ["markdown"] + ["markdown", "code"] * 3 + ["markdown"]
    assert cells[0].source.endswith("## Exercises\n\nTry these in order.") and cells[0].source.startswith("## Recap")
    assert cells[0].id == source.cells[3].id  # the heading's cell keeps its id; the new cells get new ones
    items, blocks = cells[1:-1:2], cells[2:-1:2]
    assert [c.source.split(" ", 1)[0] for c in items] == ["1.", "2.", "3."]  # a cell's list starts at its number
    assert items[0].source.endswith("What is `value` then?")
    assert items[1].source.endswith("A second paragraph of the same item.")
    for number, block in enumerate(blocks, 1):
        assert block.metadata["tags"] == ["solution", "hide-cell"] and block.metadata["exercise"] == number
        assert block.metadata["mystnb"]["code_prompt_show"] == "Show the worked solution"
        assert "assert" in block.source and not block.source.startswith("# %%")
    assert blocks[0].source.startswith("doubled = 21") and blocks[2].source.endswith('{value**2}.")')
    assert cells[-1].source.startswith("## Next") and "01_words.ipynb" in cells[-1].source
    assert len({c.id for c in solved.cells}) == len(solved.cells)
    nbformat.validate(solved)
    assert not any("solution" in c.metadata.get("tags", []) for c in source.cells)  # the input is not changed


def test_items_are_renumbered_in_order_and_a_notebook_without_solutions_is_left_alone(tmp_path):
    lazy = EXERCISES.replace("2. **Modify", "1. **Modify").replace("3. **Stretch", "1. **Stretch")
    notebook = _notebook(tmp_path / "a", exercises=lazy)
    items = [c.source for c in solutions.prepare(notebook).cells if c.source[:1].isdigit()]
    assert [s[:3] for s in items] == ["1. ", "2. ", "3. "]
    assert solutions.prepare(_notebook(tmp_path / "b", solved=None)) is None
    no_heading = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("## Next\n\n1. not an exercise")])
    assert solutions.count_exercises(no_heading) == 0 and solutions.find_exercises(no_heading) is None
    after_list = EXERCISES.replace("\n\n## Next", "\n\nSolutions: see below.\n\n## Next")
    found = solutions.find_exercises(nbformat.read(_notebook(tmp_path / "c", exercises=after_list), as_version=4))
    assert len(found.items) == 3 and found.after.startswith("Solutions: see below.")


BLOCKS = GOOD.split("# %% ")


@pytest.mark.parametrize(("text", "said"), [
    ("# %% ".join(BLOCKS[:3]), "2 solution block(s) for 3 exercises"),  # a block missing
    (GOOD + "\n# %% Exercise 4\nassert True\n", "4 solution block(s) for 3 exercises"),  # a block too many
    (GOOD.replace("assert value + 1 ==", "check = value + 1 =="), "block 'Exercise 2': has no assert"),
    (GOOD.replace("Exercise 2", "Exercise 4"), "block 'Exercise 4' where 'Exercise 2' was expected"),
    (GOOD.replace("Exercise 3\n", "Exercise 3\n# nothing yet\n").split("assert value**2")[0],
     "block 'Exercise 3': is empty"),
    (GOOD.replace("# %% Exercise 2", "# %% exercise two"), "'# %% exercise two' is not a block start"),
    ("import os\n" + GOOD, "code before '# %% Exercise 1'"),
    (GOOD.replace("assert value + 1 ==", "assert value + 1 = ="), "block 'Exercise 2': does not parse"),
    ("# only a header\n", "no '# %% Exercise 1' block"),
])
def test_a_solutions_file_that_does_not_fit_is_refused_naming_the_file_and_block(tmp_path, text, said):
    notebook = _notebook(tmp_path / "notebooks", solved=text)
    with pytest.raises(solutions.SolutionsError) as refused:
        solutions.prepare(notebook)
    assert said in str(refused.value) and str(solutions.solutions_path(notebook)) in str(refused.value)


def test_solutions_must_come_after_every_code_cell(tmp_path):
    notebook = _notebook(tmp_path / "notebooks")
    nb = nbformat.read(notebook, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("print('after the exercises')"))
    nbformat.write(nb, notebook)
    with pytest.raises(solutions.SolutionsError, match="code cell 5 comes after the Exercises cell"):
        solutions.prepare(notebook)


def test_execute_runs_the_solutions_in_the_notebooks_kernel_with_its_parameters(tmp_path):
    from build import run_course as runner

    notebook = _notebook(tmp_path / "notebooks")
    record = runner.execute(notebook, tmp_path / "out", {"factor": 3})
    assert record.status == "ok", record.error
    assert json.loads((tmp_path / "out" / record.results).read_text()) == {"value": 63}
    nb = nbformat.read(tmp_path / "out" / record.executed, as_version=4)
    assert sum("injected-parameters" in c.metadata.get("tags", []) for c in nb.cells) == 1
    said = ["".join(o.get("text", "") for o in c.outputs) for c in nb.cells
            if "solution" in c.metadata.get("tags", [])]
    assert said == ["Doubling factor gives value 126.\n", "One more is 64.\n", "The square is 3969.\n"]
    assert nb.metadata.papermill["input_path"] == str(notebook)  # not the scratch copy papermill read
    plain = runner.execute(notebook, tmp_path / "plain", {"factor": 3}, solutions=False)
    assert plain.status == "ok" and _tagged(nbformat.read(tmp_path / "plain" / plain.executed, as_version=4)) == []


def test_a_failing_solution_fails_the_run_and_a_misfit_file_fails_before_the_kernel(tmp_path):
    from build import run_course as runner

    wrong = GOOD.replace("assert value + 1 == 21 * factor + 1", "assert value == 0, 'value is not zero'")
    record = runner.execute(_notebook(tmp_path / "notebooks", solved=wrong), tmp_path / "out")
    assert record.status == "failed" and "AssertionError" in record.error and "value is not zero" in record.error
    misfit = _notebook(tmp_path / "other", solved="# %% ".join(BLOCKS[:3]))
    record = runner.execute(misfit, tmp_path / "out2")
    assert record.status == "failed" and record.error.startswith("SolutionsError: ")
    assert "2 solution block(s) for 3 exercises" in record.error and record.wall_s < 5  # no kernel was started


def _tagged(nb) -> list[str]:
    return [c.source[:40] for c in nb.cells if "solution" in c.metadata.get("tags", []) or "exercise" in c.metadata]


def test_no_committed_notebook_holds_a_solution():
    """A learner opens the committed notebook (Colab, Kaggle, a clone): the solutions are only in the build."""
    for path in [*sorted(NOTEBOOK_DIR.glob("*.ipynb")), *sorted((ROOT / "starters").glob("*.ipynb"))]:
        assert _tagged(nbformat.read(path, as_version=4)) == [], path.name


def test_every_solutions_file_fits_its_notebook():
    """Each notebooks/solutions/*.py names a course notebook and has one valid block per exercise of its list,
    and each notebook in SOLVED has such a file (the notebook tests execute them)."""
    files = sorted((NOTEBOOK_DIR / solutions.SOLUTIONS_DIR).glob("*.py"))
    assert {p.stem for p in files} <= set(NOTEBOOK_NAMES), "a solutions file without its notebook"
    missing = [name for name in SOLVED if not solutions.solutions_path(NOTEBOOK_DIR / f"{name}.ipynb").is_file()]
    assert missing == [], f"no notebooks/solutions/<name>.py for {missing}"
    for path in files:
        solved = solutions.prepare(NOTEBOOK_DIR / f"{path.stem}.ipynb")  # raises, naming the file, on a misfit
        source = nbformat.read(NOTEBOOK_DIR / f"{path.stem}.ipynb", as_version=4)
        assert len(_tagged(solved)) == solutions.count_exercises(source) >= 1, path.name
