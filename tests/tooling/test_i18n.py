"""The Chinese edition's tooling: catalogs current, zh notebooks the same code as the English (the zh runs'
results: tests/notebooks/test_zh_runs.py).

build/i18n.py writes notebooks/zh/ from the English notebooks and locale/zh/*.po; freegpu prints through
freegpu.i18n.tr and its own catalog, freegpu/locale/zh.po.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize

import nbformat
import polib
import pytest
from conftest import NOTEBOOK_DIR, NOTEBOOK_NAMES

from build import i18n
from build.solutions import load_solutions

ZH_DIR = NOTEBOOK_DIR / "zh"
CJK = re.compile(r"[\u4e00-\u9fff]")


def english(name: str):
    return nbformat.read(NOTEBOOK_DIR / f"{name}.ipynb", as_version=4)


def chinese(name: str):
    return nbformat.read(ZH_DIR / f"{name}.ipynb", as_version=4)


# ---------------------------------------------------------------------------------------------- the machinery
def test_code_units_are_comments_and_what_a_learner_reads():
    source = ('x = {"key": "a b"}  # the table\n'
              'print(f"{len(x)} rows, first {x[\'key\']:>5}", "done" if x else "empty")\n'
              'raise ValueError("bad value: " + str(x))\n'
              'parser.add_argument("--lr", type=float, help="learning rate")\n'
              'print("\\n".join(sorted(x)))\n'
              '!pip install thing  # shell\n')
    assert i18n.code_units(source) == [("comment", "the table"), ("string", "{len(x)} rows, first {x['key']:>5}"),
                                       ("string", "done"), ("string", "empty"), ("string", "bad value: "),
                                       ("string", "learning rate")]


def test_translated_code_is_the_same_code():
    source = ('value = 3\n'
              'print(f"{value} steps, loss {value / 7:.3f}\\n"\n'
              '      f"next line {\'quoted\'}")  # explain\n'
              'print("it\'s plain")\n')
    table = {"{value} steps, loss {value / 7:.3f}\nnext line {'quoted'}":
             "{value} 步，损失 {value / 7:.3f}\n下一行 {'quoted'}",
             "explain": "解释", "it's plain": "普通的\"字符串\""}
    zh = i18n.translate_code(source, lambda text: table.get(text, text))
    assert "# 解释" in zh and 'value = 3' in zh
    printed = {}
    for code, key in ((source, "en"), (zh, "zh")):
        lines: list[str] = []
        exec(compile(code, key, "exec"), {"print": lambda *a, out=lines: out.append(" ".join(map(str, a)))})
        printed[key] = lines
    assert printed["en"] == ["3 steps, loss 0.429\nnext line quoted", "it's plain"]
    assert printed["zh"] == ["3 步，损失 0.429\n下一行 quoted", '普通的"字符串"']


def test_docstrings_and_shell_comments_are_units_and_keep_their_lines():
    source = ('%%writefile job.py\n"""Train a model.\n\nCopy it.\n"""\n\n\ndef f():\n    """Return one."""\n'
              '    return 1  # the answer\n')
    assert i18n.code_units(source) == [("docstring", "Train a model.\n\nCopy it.\n"), ("docstring", "Return one."),
                                       ("comment", "the answer")]
    table = {"Train a model.\n\nCopy it.\n": "训练一个模型。\n\n复制它。\n", "Return one.": "返回 1。",
             "the answer": "答案"}
    zh = i18n.translate_code(source, lambda text: table.get(text, text))
    namespace: dict = {}
    exec(compile(i18n.split_magic(zh)[1], "zh", "exec"), namespace)
    assert namespace["__doc__"] == "训练一个模型。\n\n复制它。\n" and namespace["f"].__doc__ == "返回 1。"
    assert zh.count("\n") == source.count("\n") and _normalised(zh) == _normalised(source)
    assert i18n.rule_breaks("docstring", "Return one.", "返回\n1。")  # one line stays one line
    shell = '%%writefile job.sbatch\n#!/bin/bash\n#SBATCH --nodes=2\n# Two nodes here.\nsrun hostname  # each node\n'
    assert i18n.code_units(shell) == [("comment", "Two nodes here."), ("comment", "each node")]
    zh = i18n.translate_code(shell, {"Two nodes here.": "这里两个节点。", "each node": "每个节点"}.get)
    assert zh == ('%%writefile job.sbatch\n#!/bin/bash\n#SBATCH --nodes=2\n# 这里两个节点。\n'
                  'srun hostname  # 每个节点\n')
    assert _normalised(zh) == _normalised(shell)


def test_untranslatable_code_is_refused_with_the_cell_named():
    with pytest.raises(i18n.TranslationError, match="changes its"):  # a field renamed would run other code
        i18n.translate_code("print(f'{x} items')", lambda text: "{y} 项")
    nb = english(NOTEBOOK_NAMES[0])
    cell = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", [])) + 1
    nb.cells[cell].source = nb.cells[cell].source.replace("globals()", "dict(globals())")
    with pytest.raises(i18n.TranslationError, match=rf"cell {cell}: the cell after the parameters has no"):
        i18n.zh_notebook(NOTEBOOK_NAMES[0], nb=nb)


def test_markdown_blocks_round_trip_and_keep_fences():
    source = "# Title\n\nSome text\nmore.\n\n```bash\naccelerate launch x.py\n\n--flag\n```\n\n- a\n- b"
    blocks = i18n.markdown_blocks(source)
    assert "\n".join(block for block, _ in blocks) == source
    assert ("```bash\naccelerate launch x.py\n\n--flag\n```", False) in blocks
    assert [block for block, ok in blocks if ok] == ["# Title", "Some text\nmore.", "- a\n- b"]


# ---------------------------------------------------------------------------------------------- catalogs
@pytest.mark.parametrize("name", [*NOTEBOOK_NAMES, "freegpu"])
def test_every_unit_has_a_current_translation(name):
    """Stale is a failure: an English unit with no translation, or a fuzzy one, is named with its cell."""
    found = i18n.problems(name)
    assert not found, "\n".join(found[:20]) + f"\n({len(found)} in all; fix them, then `python build/i18n.py write`)"


def test_a_changed_english_cell_is_named_as_stale():
    name = NOTEBOOK_NAMES[1]
    nb = english(name)
    index = next(i for i, cell in enumerate(nb.cells) if cell.cell_type == "markdown" and i > 2)
    nb.cells[index].source += " One more sentence."
    found = i18n.problems(name, nb=nb)
    assert found and all(f"{name} cell {index} (markdown)" in line for line in found), found


def test_translations_keep_fields_and_link_targets():
    assert i18n.rule_breaks("string", "{n} steps", "{n} 步") == []
    assert i18n.rule_breaks("string", "{n} steps", "{m} 步")
    assert i18n.rule_breaks("markdown", "see [x](a.ipynb)", "见 [x](b.ipynb)")
    catalog = polib.pofile(str(i18n.PACKAGE_CATALOG))
    broken = [e.msgid for e in catalog if e.msgstr and sorted(i18n.FIELD.findall(e.msgid))
              != sorted(i18n.FIELD.findall(e.msgstr))]
    assert not broken, broken


def test_package_messages_go_through_tr_with_a_plain_string():
    """`tr(f"...")` could never be translated: the message must be a literal, formatted after `tr`."""
    bad = []
    for path in sorted(i18n.PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "tr":
                arg = node.args[0] if len(node.args) == 1 else None
                if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
                    bad.append(f"{path.name}:{node.lineno}")
    assert not bad, bad
    assert len(i18n.package_messages()) >= 40  # verdicts, check-cell errors and launcher descriptions at least


def test_freegpu_prints_chinese_when_told():
    from freegpu import i18n as lang
    from freegpu.checks import check_choice

    try:
        lang.set_language("zh")
        with pytest.raises(ValueError) as zh:
            check_choice("profile", "fast", ("auto", "smoke", "full"))
        lang.set_language("en")
        with pytest.raises(ValueError) as en:
            check_choice("profile", "fast", ("auto", "smoke", "full"))
    finally:
        lang.set_language("en")
    assert CJK.search(str(zh.value)) and not CJK.search(str(en.value))
    assert "'fast'" in str(zh.value) and "profile" in str(zh.value)
    with pytest.raises(ValueError, match="language='fr' is not one of"):
        lang.set_language("fr")


# ---------------------------------------------------------------------------------------------- notebooks
def test_zh_notebooks_are_written_from_the_catalogs():
    assert sorted(p.stem for p in ZH_DIR.glob("*.ipynb")) == sorted(NOTEBOOK_NAMES)
    differ = i18n.write(NOTEBOOK_NAMES, check=True)
    assert not differ, f"notebooks/zh out of date for {differ}: run `make sync`"


def _normalised(source: str) -> tuple[str, int]:
    """The syntax tree of a code cell with every translatable string and docstring blanked, and how many there
    were; a shell script a cell writes, with its translatable comments blanked."""
    if i18n.is_shell_script(source):
        head, body = i18n.split_magic(source)
        lines = body.split("\n")
        found = i18n.shell_comments(body, english=False)
        for row, col, end_col, _ in reversed(found):
            lines[row - 1] = lines[row - 1][:col] + "#" + lines[row - 1][end_col:]
        return head + "\n".join(lines), len(found)
    if not i18n.is_python(source):
        return source, 0
    head, body = i18n.split_magic(source)
    tree = ast.parse(i18n.mask_shell(body))
    nodes = i18n.text_nodes(tree, english=False) + i18n.docstrings(tree, english=False)
    for node in ast.walk(tree):
        for field, value in ast.iter_fields(node):
            if isinstance(value, list):
                setattr(node, field, [ast.Constant("") if v in nodes else v for v in value])
            elif value in nodes:
                setattr(node, field, ast.Constant(""))
    return head + ast.dump(tree), len(nodes)


def _comment_rows(source: str) -> list[int]:
    """The line of every comment, counted from the last line (a string cut over more lines shifts the rest)."""
    body = i18n.mask_shell(i18n.split_magic(source)[1])
    rows = [t.start[0] for t in tokenize.generate_tokens(io.StringIO(body).readline) if t.type == tokenize.COMMENT]
    total = body.count("\n") + 1
    return [total - row for row in rows]


@pytest.mark.parametrize("name", NOTEBOOK_NAMES)
def test_zh_solutions_are_the_english_solutions_in_chinese(name):
    """The worked solutions a zh notebook runs: the English blocks with only comments and printed strings changed,
    every one of their units in the catalog, and Chinese where the English has words."""
    path = i18n.SOLUTIONS / f"{name}.py"
    blocks = load_solutions(path)
    zh = i18n.zh_solutions(name, blocks)
    assert len(zh) == len(blocks)
    for number, (a, b) in enumerate(zip(blocks, zh, strict=True), 1):
        assert _normalised(a) == _normalised(b), f"{name} exercise {number}: the solution's code differs"
        assert _comment_rows(a) == _comment_rows(b), f"{name} exercise {number}: comments moved"
        if i18n.code_units(a):
            assert CJK.search(b), f"{name} exercise {number}: nothing of the solution is in Chinese"
    units = i18n.solution_units(name)
    assert units, f"{name}: its solutions have no comment or printed sentence to translate"
    known = i18n.current(i18n.load_catalog(name))
    assert all(text in known for _, _, text in units)


def test_a_changed_solution_is_named_as_stale(tmp_path, monkeypatch):
    name = NOTEBOOK_NAMES[1]
    source = (i18n.SOLUTIONS / f"{name}.py").read_text()
    (tmp_path / f"{name}.py").write_text(source.replace("# %% Exercise 2\n", "# %% Exercise 2\n# A new line.\n", 1))
    monkeypatch.setattr(i18n, "SOLUTIONS", tmp_path)
    found = i18n.problems(name)
    assert found == [f"{name} exercise 2 solution (comment): no translation of 'A new line.'"], found


@pytest.mark.parametrize("name", NOTEBOOK_NAMES)
def test_zh_code_is_the_english_code(name):
    """Cell by cell: same kinds, tags and shell lines; code the same syntax tree once the learner's strings are
    blanked; comments in the same places; the one other change is `language="zh"` in the check cell. Markdown is
    in Chinese."""
    en, zh = english(name), chinese(name)
    assert [(c.cell_type, c.metadata.get("tags", [])) for c in en.cells] == \
        [(c.cell_type, c.metadata.get("tags", [])) for c in zh.cells]
    chinese_cells = 0
    for index, (a, b) in enumerate(zip(en.cells, zh.cells, strict=True)):
        if a.cell_type != "code":
            chinese_cells += bool(CJK.search(b.source))
            continue
        source = i18n.set_language(a.source) if i18n.CHECK_CALL in a.source else a.source
        assert _normalised(source) == _normalised(b.source), f"{name} cell {index}: the code differs"
        shell = [line for line in source.split("\n") if line.lstrip().startswith(("!", "%"))]
        assert shell == [line for line in b.source.split("\n") if line.lstrip().startswith(("!", "%"))]
        if i18n.is_python(a.source):  # every comment still there, on its line
            assert _comment_rows(a.source) == _comment_rows(b.source), f"{name} cell {index}: comments moved"
    markdown = sum(c.cell_type == "markdown" and "badges" not in c.metadata.get("tags", []) for c in en.cells)
    assert chinese_cells == markdown, f"{name}: {markdown - chinese_cells} markdown cell(s) with no Chinese"
    assert sum('globals(), language="zh")' in c.source for c in zh.cells) == 1
