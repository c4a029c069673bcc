"""The Chinese edition: one gettext catalog per notebook, and the zh notebooks written from it.

The English notebooks are the source. `locale/zh/<name>.po` holds the Chinese of every translatable unit of
`notebooks/<name>.ipynb`:

- a markdown cell, block by block (blocks are separated by blank lines; fenced code is kept as it is);
- in a code cell, every comment, every string a learner reads: the arguments of `print(...)`, the message of
  `raise SomeError(...)`, an argparse `help=`, a docstring. An f-string is one unit, its `{...}` fields written as
  in the code; a docstring's translation keeps its number of lines;
- in a shell script a cell writes (`%%writefile x.sh` or `x.sbatch`), every `# ` comment (not `#!` or `#SBATCH`);
- the same units of the notebook's worked solutions (`notebooks/solutions/<name>.py`): a zh notebook's executed
  copy gets them translated (build/solutions.py `prepare`), so its solution cells comment and print in Chinese.

`notebooks/zh/<name>.ipynb` is the English notebook with each unit replaced by its translation, the badges
pointing at the zh notebook, and its check cell calling `check_parameters(NOTEBOOK, globals(), language="zh")`
(so what `freegpu` prints is Chinese too).
Nothing else differs: identifiers, API names, parameters and every line of code stay the same
(tests/tooling/test_i18n.py compares the two syntax trees).

    python build/i18n.py update [NAME ...]   # refresh the catalogs from the English (gettext's msgmerge: a changed
                                             # unit keeps its old translation, marked fuzzy, with the old English)
    python build/i18n.py write               # write notebooks/zh/*.ipynb (`make sync` runs it)
    python build/i18n.py check               # exit 1 naming every cell with no current translation, and every
                                             # zh notebook that `write` would change

A unit is current when the catalog has its English as a msgid, with a translation, not marked fuzzy. Code units
are found with Python 3.11's `ast` and `tokenize`; shell lines (`!...`) and `%%bash` cells are left as they are.
"""

from __future__ import annotations

import argparse
import ast
import copy
import functools
import io
import re
import shutil
import subprocess
import sys
import tempfile
import tokenize
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import nbformat
import polib

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
LANGUAGE = "zh"
LOCALE = ROOT / "locale" / LANGUAGE
ZH_NOTEBOOKS = NOTEBOOKS / LANGUAGE
SOLUTIONS = NOTEBOOKS / "solutions"  # the worked solutions (build/solutions.py): their units join the notebook's
PACKAGE = ROOT / "shared" / "freegpu"
PACKAGE_CATALOG = PACKAGE / "locale" / f"{LANGUAGE}.po"  # what freegpu prints: its own catalog (freegpu.i18n)
PACKAGE_NAME = "freegpu"
# Catalogs of messages in Python code, found by Babel's extractor: name -> (files, catalog, the function's name).
MESSAGE_CATALOGS = {
    PACKAGE_NAME: (lambda: sorted(PACKAGE.rglob("*.py")), PACKAGE_CATALOG, "tr"),
    "site": (lambda: [ROOT / "build" / "course_site.py"], LOCALE / "site.po", "t"),
    # the setup cell's messages, the same in every notebook: its zh copy is written from them, not translated
    "setup": (lambda: [ROOT / "build" / "sync_notebooks.py"], LOCALE / "setup.po", "t"),
}
CHECK_CALL = "check_parameters(NOTEBOOK, globals())"  # every check cell's; the zh one passes language="zh"
FENCE = re.compile(r"^\s*(```|~~~)")
WORD = re.compile(r"[A-Za-z]{2,}")
FIELD = re.compile(r"\{[^{}]*(?:\{[^{}]*\}[^{}]*)*\}")  # one {...} field, one level of nested braces allowed
GLOSSARY_LINK = re.compile(r"(\]\([^)\s]*?)docs/glossary\.md#([\w-]+)")  # a link into the English glossary
LINK_TARGET = re.compile(r"\]\(([^)\s]+)[^)]*\)")
SKIP_COMMENT = re.compile(r"^(noqa|type:|pragma|%%|fmt:)")
HEADER = (
    "Chinese translation of notebooks/{name}.ipynb (the English is the source).\n"
    "Written by build/i18n.py update; translate msgstr, keep every {{...}} field and link target as in msgid.\n"
    "Glossary of terms: docs/zh/glossary.md."
)


class TranslationError(ValueError):
    """A translation that cannot be written into the zh notebook (it names the notebook and the cell)."""


@dataclass(frozen=True)
class Unit:
    cell: int  # the cell's index in the notebook
    kind: str  # "markdown", "comment", "string" or "docstring"
    text: str  # the English: the msgid


# ---------------------------------------------------------------------------------------------- markdown
def markdown_blocks(source: str) -> list[tuple[str, bool]]:
    """`source` cut at blank lines into (block, translatable); a fenced code block is one untranslated block."""
    blocks: list[tuple[str, bool]] = []
    current: list[str] = []
    fenced = False

    def flush() -> None:
        if current:
            blocks.append(("\n".join(current), True))
            current.clear()

    for line in source.split("\n"):
        if fenced:
            blocks[-1] = (blocks[-1][0] + "\n" + line, False)
            if FENCE.match(line):
                fenced = False
            continue
        if FENCE.match(line):
            flush()
            blocks.append((line, False))
            fenced = True
        elif line.strip():
            current.append(line)
        else:
            flush()
            blocks.append(("", False))
    flush()
    return blocks


def translatable(text: str) -> bool:
    return bool(WORD.search(text))


# ---------------------------------------------------------------------------------------------- code
def split_magic(source: str) -> tuple[str, str]:
    """(`%%writefile ...` first line with its newline, or "", the Python that follows)."""
    if source.startswith("%%writefile"):
        head, _, body = source.partition("\n")
        return head + "\n", body
    return "", source


SHELL_SCRIPTS = (".sh", ".sbatch")  # scripts a cell writes whose `# ` comments are translated
SHELL_COMMENT = re.compile(r"(^\s*|\S\s{2,})(# )(.*\S)\s*$")  # a whole-line comment, or two spaces then `# `


def is_shell_script(source: str) -> bool:
    head, _ = split_magic(source)
    return bool(head) and head.split()[-1].endswith(SHELL_SCRIPTS)


def shell_comments(body: str, english: bool = True) -> list[tuple[int, int, int, str]]:
    """(row, start col, end col, text) of every `# ` comment of a shell script (with `english`, those with English
    words). Quotes are not read: the course's scripts keep `#` out of their strings."""
    found = []
    for row, line in enumerate(body.split("\n"), 1):
        match = SHELL_COMMENT.search(line)
        if match and (not english or translatable(match.group(3))):
            found.append((row, match.start(2), match.end(3), match.group(3)))
    return found


def is_python(source: str) -> bool:
    """False for a cell that is not Python (`%%bash`, `%%capture`...: any cell magic but %%writefile of a .py)."""
    head, _ = split_magic(source)
    if head:
        return head.split()[-1].endswith(".py")
    return not source.lstrip().startswith("%%")


def mask_shell(source: str) -> str:
    """`!cmd` and `%magic` lines replaced by `pass` at their indentation, so `ast` and `tokenize` read the rest."""
    lines = source.split("\n")
    for i, line in enumerate(lines):
        stripped = line.lstrip()
        if stripped.startswith(("!", "%")):
            lines[i] = line[: len(line) - len(stripped)] + "pass"
    return "\n".join(lines)


def _template(node: ast.AST) -> str:
    """The unit an f-string or a string makes: literal text with `{expr!c:spec}` fields written as in the code."""
    if isinstance(node, ast.Constant):
        return node.value
    parts = []
    for value in node.values:
        if isinstance(value, ast.Constant):
            parts.append(value.value.replace("{", "{{").replace("}", "}}"))
            continue
        field = "{" + ast.unparse(value.value)
        if value.conversion != -1:
            field += "!" + chr(value.conversion)
        if value.format_spec is not None:
            field += ":" + _template(value.format_spec)
        parts.append(field + "}")
    return "".join(parts)


def _is_text(node: ast.AST) -> bool:
    return isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str))


def _texts_under(node: ast.AST) -> Iterator[ast.AST]:
    """The string nodes a learner reads in an argument: not inside a call, a subscript or a comparison."""
    if _is_text(node):
        yield node
        return
    if isinstance(node, ast.Call | ast.Subscript | ast.Compare | ast.Attribute | ast.Lambda):
        return
    for child in ast.iter_child_nodes(node):
        yield from _texts_under(child)


def _call_name(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def text_nodes(tree: ast.AST, english: bool = True) -> list[ast.AST]:
    """Every translatable string node of `tree`: print's arguments, a raised error's message, a `help=`.
    With `english` (the default), only those with English words; else all the string nodes in those places."""
    found: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _call_name(node)
            if name == "print" or (isinstance(node, ast.Call) and _raised(node, tree)):
                for arg in node.args:
                    found.extend(_texts_under(arg))
            for keyword in node.keywords:
                if keyword.arg == "help":
                    found.extend(_texts_under(keyword.value))
    return [node for node in found if not english or translatable(_template(node))]


def docstrings(tree: ast.AST, english: bool = True) -> list[ast.Constant]:
    """The docstring of the module and of each function and class (with `english`, those with English words)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                found.append(first.value)
    return [node for node in found if not english or translatable(node.value)]


def _raised(call: ast.Call, tree: ast.AST) -> bool:
    return any(isinstance(node, ast.Raise) and node.exc is call for node in ast.walk(tree))


def comments(source: str) -> list[tuple[int, int, int, str]]:
    """(row, start col, end col, text) of every translatable comment; `text` is what follows '# '."""
    found = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.COMMENT:
            continue
        text = token.string[1:].strip()
        if token.string.startswith("#!") or SKIP_COMMENT.match(text) or not translatable(text):
            continue
        found.append((token.start[0], token.start[1], token.end[1], text))
    return found


def _char_col(line: str, byte_col: int) -> int:
    return len(line.encode()[:byte_col].decode())


def code_units(source: str) -> list[tuple[str, str]]:
    """(kind, text) of every unit of a code cell, in the order of the source."""
    if is_shell_script(source):
        return [("comment", text) for *_, text in shell_comments(split_magic(source)[1])]
    if not is_python(source):
        return []
    _, body = split_magic(source)
    masked = mask_shell(body)
    tree = ast.parse(masked)
    units = [(node.lineno, node.col_offset, "string", _template(node)) for node in text_nodes(tree)]
    units += [(node.lineno, node.col_offset, "docstring", node.value) for node in docstrings(tree)]
    lines = masked.split("\n")
    units += [(row, len(lines[row - 1][:col].encode()), "comment", text) for row, col, _, text in comments(masked)]
    return [(kind, text) for _, _, kind, text in sorted(units)]


def f_string_literal(template: str, fields: list[str], quote_hint: str = '"') -> str:
    """Python source of an f-string whose template (as `_template` writes it) is `template`."""
    marks: dict[str, str] = {}
    text = template
    for i, field in enumerate(sorted(set(fields), key=len, reverse=True)):
        mark = f"\x00{i}\x00"
        marks[mark] = field
        text = text.replace(field, mark)
    used = "".join(fields)
    quote = next((q for q in (quote_hint, '"', "'") if q not in used), None)
    if quote is None:
        raise TranslationError(f"no quote character fits the fields of {template!r}")
    body = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t").replace(quote, "\\" + quote)
    for mark, field in marks.items():
        body = body.replace(mark, field)
    return f"f{quote}{body}{quote}"


def split_template(template: str, fields: list[str], parts: int) -> list[str]:
    """`template` cut into at most `parts` pieces of about equal length, never inside a {...} field or a {{ }}."""
    if parts <= 1 or len(template) < 2 * parts:
        return [template]
    spans = [m.span() for field in set(fields) for m in re.finditer(re.escape(field), template)]
    spans += [m.span() for m in re.finditer(r"\{\{|\}\}", template)]
    allowed = [i for i in range(1, len(template)) if not any(a < i < b for a, b in spans)
               and not _inside_word(template, i)]
    cuts = []
    for k in range(1, parts):
        want = round(k * len(template) / parts)
        best = min((i for i in allowed if not cuts or i > cuts[-1]), key=lambda i: abs(i - want), default=None)
        if best is not None:
            cuts.append(best)
    bounds = [0, *cuts, len(template)]
    return [template[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if a < b]


def _inside_word(text: str, i: int) -> bool:
    """Whether a cut before `text[i]` would split a word, a name, a number or a URL (ASCII on both sides)."""
    return all(c.isascii() and not c.isspace() for c in text[i - 1: i + 1])


def zh_links(text: str) -> str:
    """Markdown whose glossary links point at the zh glossary (docs/zh/glossary.md), at the same term."""
    anchors = zh_glossary_anchors()
    return GLOSSARY_LINK.sub(lambda m: f"{m.group(1)}docs/zh/glossary.md#{anchors.get(m.group(2), m.group(2))}", text)


def github_anchor(heading: str) -> str:
    """The anchor GitHub (and the site's MyST) gives a heading: lower case, punctuation out, spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", "")).replace(" ", "-")


@functools.cache
def zh_glossary_anchors() -> dict[str, str]:
    """English glossary anchor -> the anchor of the same term's heading in docs/zh/glossary.md."""
    zh = {en: f"{zh_name} ({en})" for zh_name, en in
          re.findall(r"^## (.+?) \((.+)\)$", (ROOT / "docs" / "zh" / "glossary.md").read_text(), flags=re.M)}
    return {github_anchor(en): github_anchor(heading) for en, heading in zh.items()}


def _literal(piece: str, formatted: bool) -> str:
    """Python source of one piece: an f-string where it holds a field, else a plain string."""
    fields = FIELD.findall(piece.replace("{{", "").replace("}}", ""))
    if formatted and fields:
        return f_string_literal(piece, FIELD.findall(piece))
    return repr(piece.replace("{{", "{").replace("}}", "}") if formatted else piece)


def translate_code(source: str, translate: Callable[[str], str]) -> str:
    """The code cell with every unit replaced by `translate(unit)`; the code itself unchanged."""
    if is_shell_script(source):
        head, body = split_magic(source)
        return head + _apply(body.split("\n"), [(row, col, row, end_col, "# " + translate(english))
                                                for row, col, end_col, english in shell_comments(body)])
    if not is_python(source):
        return source
    head, body = split_magic(source)
    masked = mask_shell(body)
    tree = ast.parse(masked)
    lines = body.split("\n")
    edits: list[tuple[int, int, int, int, str]] = []  # (row, col, end row, end col) in characters, new text
    for node in text_nodes(tree):
        english = _template(node)
        chinese = translate(english)
        if chinese == english:
            continue
        if sorted(FIELD.findall(english)) != sorted(FIELD.findall(chinese)):
            raise TranslationError(f"the translation of {english!r} changes its {{...}} fields: {chinese!r}")
        rows = node.end_lineno - node.lineno + 1  # a string written over several lines keeps as many
        pieces = split_template(chinese, FIELD.findall(english), rows)
        literals = [_literal(piece, isinstance(node, ast.JoinedStr)) for piece in pieces]
        indents = [re.match(r"\s*", lines[row - 1]).group() for row in range(node.lineno + 1, node.end_lineno + 1)]
        literal = literals[0] + "".join(f"\n{indent}{lit}" for indent, lit in zip(indents, literals[1:], strict=False))
        parsed = ast.parse(f"({literal})", mode="eval").body
        if not _is_text(parsed) or _template(parsed) != chinese:
            raise TranslationError(f"the translation of {english!r} does not make a string literal: {literal}")
        edits.append(_replacing(node, lines, literal))
    for node in docstrings(tree):
        chinese = translate(node.value)
        if chinese == node.value:
            continue
        literal = f'"""{chinese}"""'
        if rule_breaks("docstring", node.value, chinese) or ast.literal_eval(literal) != chinese:
            raise TranslationError(f"the translation of the docstring {node.value[:60]!r} cannot replace it: "
                                   f"{chinese[:60]!r}")
        edits.append(_replacing(node, lines, literal))
    for row, col, end_col, english in comments(masked):
        chinese = translate(english)
        if chinese != english:
            edits.append((row, col, row, end_col, "# " + chinese))
    return head + _apply(lines, edits)


def _replacing(node: ast.AST, lines: list[str], new: str) -> tuple[int, int, int, int, str]:
    """The edit that puts `new` where `node` is written: (row, col, end row, end col) in characters, new text."""
    return (node.lineno, _char_col(lines[node.lineno - 1], node.col_offset),
            node.end_lineno, _char_col(lines[node.end_lineno - 1], node.end_col_offset), new)


def _apply(lines: list[str], edits: list[tuple[int, int, int, int, str]]) -> str:
    """`lines` with each edit made, the last first, so that no edit moves another; joined back into text."""
    for row, col, end_row, end_col, new in sorted(edits, reverse=True):
        lines[row - 1: end_row] = [lines[row - 1][:col] + new + lines[end_row - 1][end_col:]]
    return "\n".join(lines)


def set_language(source: str, language: str = LANGUAGE) -> str:
    """The check cell calling `check_parameters` with `language` (the one change of code a zh notebook makes)."""
    if source.count(CHECK_CALL) != 1:
        raise TranslationError(f"the cell after the parameters has no `{CHECK_CALL}`")
    return source.replace(CHECK_CALL, CHECK_CALL[:-1] + f', language="{language}")')


# ---------------------------------------------------------------------------------------------- notebooks
def units(nb) -> list[Unit]:
    """Every translatable unit of an English notebook, in order (the badges cell is generated, not translated)."""
    found = []
    for index, cell in enumerate(nb.cells):
        if {"badges", "setup"} & set(cell.metadata.get("tags", [])):
            continue  # generated: the zh ones are written by build/sync_notebooks.py from locale/zh/setup.po
        if cell.cell_type == "markdown":
            found += [Unit(index, "markdown", block) for block, ok in markdown_blocks(cell.source)
                      if ok and translatable(block)]
        elif cell.cell_type == "code":
            found += [Unit(index, kind, text) for kind, text in code_units(cell.source)]
    return found


def solution_units(name: str) -> list[tuple[int, str, str]]:
    """(exercise number, kind, text) of every unit of the notebook's worked solutions, in order (none without a
    solutions file)."""
    path = SOLUTIONS / f"{name}.py"
    if not path.is_file():
        return []
    from build.solutions import load_solutions

    blocks = load_solutions(path)
    return [(number, kind, text) for number, block in enumerate(blocks, 1) for kind, text in code_units(block)]


def zh_solutions(name: str, blocks: list[str]) -> list[str]:
    """The solution blocks of `name` with their comments and printed strings translated (the code unchanged)."""
    known = current(load_catalog(name))
    return [translate_code(block, lambda text: known.get(text, text)) for block in blocks]


def catalog_path(name: str) -> Path:
    return MESSAGE_CATALOGS[name][1] if name in MESSAGE_CATALOGS else LOCALE / f"{name}.po"


def package_messages(name: str = PACKAGE_NAME) -> list[tuple[str, int, str]]:
    """(file, line, message) of every `tr("...")` in the package (or `t("...")` of the site builder, with
    name "site"), found by Babel's extractor."""
    from babel.messages.extract import extract_from_file

    files, _, keyword = MESSAGE_CATALOGS[name]
    found = []
    for path in files():
        for lineno, message, _, _ in extract_from_file("python", str(path), keywords={keyword: None}):
            if isinstance(message, str):
                found.append((str(path.relative_to(ROOT)), lineno, message))
    return found


def load_catalog(name: str) -> polib.POFile:
    path = catalog_path(name)
    return polib.pofile(str(path)) if path.exists() else polib.POFile()


def current(catalog: polib.POFile) -> dict[str, str]:
    """msgid -> msgstr for every entry that is translated and not fuzzy."""
    return {e.msgid: e.msgstr for e in catalog if e.msgstr and "fuzzy" not in e.flags and not e.obsolete}


def template_catalog(name: str, nb=None) -> polib.POFile:
    pot = polib.POFile(wrapwidth=0)
    pot.metadata = {"Project-Id-Version": f"accelerate-on-free-notebooks {name}", "MIME-Version": "1.0",
                    "Content-Type": "text/plain; charset=UTF-8", "Content-Transfer-Encoding": "8bit",
                    "Language": LANGUAGE}
    pot.header = HEADER.format(name=name)
    seen: dict[str, polib.POEntry] = {}
    if name in MESSAGE_CATALOGS:
        pot.header = f"Chinese of the messages of {name} ({MESSAGE_CATALOGS[name][2]}). Keep every {{...}} field."
        found = [("message", file, line, text) for file, line, text in package_messages(name)]
    else:
        found = [(unit.kind, f"{name}.ipynb", f"cell{unit.cell}", unit.text) for unit in units(nb)]
        found += [(kind, f"solutions/{name}.py", f"exercise{number}", text)
                  for number, kind, text in solution_units(name)]
    for kind, file, where, text in found:
        entry = seen.get(text)
        if entry is None:
            entry = seen[text] = polib.POEntry(msgid=text, msgstr="", comment=kind,
                                               flags=["python-brace-format"] if kind == "message" else [])
            pot.append(entry)
        entry.occurrences.append((file, str(where)))
    return pot


def update(names: list[str]) -> None:
    """Refresh each catalog from its English notebook with msgmerge (fuzzy matches keep the old translation)."""
    msgmerge = shutil.which("msgmerge")
    for name in names:
        path = catalog_path(name)
        nb = None if name in MESSAGE_CATALOGS else nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
        pot = template_catalog(name, nb)
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or msgmerge is None:
            if path.exists():  # no gettext tools: keep what matches exactly, drop the rest
                known = current(load_catalog(name))
                for entry in pot:
                    entry.msgstr = known.get(entry.msgid, "")
            pot.save(str(path))
            continue
        with tempfile.TemporaryDirectory() as tmp:
            pot_path = Path(tmp) / f"{name}.pot"
            pot.save(str(pot_path))
            subprocess.run([msgmerge, "--quiet", "--update", "--backup=none", "--previous", "--no-wrap",
                            str(path), str(pot_path)], check=True)
        merged = polib.pofile(str(path), wrapwidth=0)  # msgmerge keeps obsolete entries (#~): drop them
        for entry in merged.obsolete_entries():
            merged.remove(entry)
        merged.header = pot.header
        merged.save(str(path))


def problems(name: str, nb=None, catalog: polib.POFile | None = None) -> list[str]:
    """Each cell of `name` with a unit that has no current translation, or whose translation breaks a rule.

    `name` "freegpu" checks the package's messages instead, each named by its file and line."""
    catalog = load_catalog(name) if catalog is None else catalog
    entries = {e.msgid: e for e in catalog if not e.obsolete}
    if name in MESSAGE_CATALOGS:
        found_units = [(f"{file}:{line}", "string", text) for file, line, text in package_messages(name)]
    else:
        nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4) if nb is None else nb
        found_units = [(f"{name} cell {u.cell} ({u.kind})", u.kind, u.text) for u in units(nb)]
        found_units += [(f"{name} exercise {number} solution ({kind})", kind, text)
                        for number, kind, text in solution_units(name)]
    found = []
    for where, kind, text in found_units:
        unit = Unit(0, kind, text)
        entry = entries.get(unit.text)
        short = unit.text[:70].replace("\n", " ")
        if entry is None or not entry.msgstr:
            found.append(f"{where}: no translation of {short!r}")
        elif "fuzzy" in entry.flags:
            found.append(f"{where}: the English changed since it was translated (fuzzy): {short!r}")
        else:
            found += [f"{where}: {p}" for p in rule_breaks(unit.kind, unit.text, entry.msgstr)]
    return found


def rule_breaks(kind: str, english: str, chinese: str) -> list[str]:
    """What a translation must keep: the {...} fields of code strings, the link targets of markdown, a comment on
    one line, a docstring's lines."""
    found = []
    if kind == "string" and sorted(FIELD.findall(english)) != sorted(FIELD.findall(chinese)):
        found.append(f"fields differ: {sorted(FIELD.findall(english))} -> {sorted(FIELD.findall(chinese))}")
    if kind == "markdown":
        normal = [t.replace("/docs/zh/", "/docs/").replace("notebooks/zh/", "notebooks/")
                  .replace("/diagrams/zh/", "/diagrams/en/") for t in LINK_TARGET.findall(chinese)]
        if sorted(LINK_TARGET.findall(english)) != sorted(normal):
            found.append(f"link targets differ: {LINK_TARGET.findall(english)} -> {LINK_TARGET.findall(chinese)}")
    if kind == "comment" and "\n" in chinese:
        found.append("a comment's translation has a line break")
    if kind == "docstring" and chinese.count("\n") != english.count("\n"):
        found.append(f"a docstring's translation must keep its {english.count(chr(10)) + 1} line(s)")
    if kind == "docstring" and ('"""' in chinese or "\\" in chinese or chinese.endswith('"')):
        found.append("a docstring's translation may not hold three double quotes or a backslash, "
                     "nor end in a quote")
    return found


def zh_notebook(name: str, nb=None):
    """The zh notebook of `name`: the English one, translated unit by unit (an untranslated unit stays English)."""
    from build import sync_notebooks as sync

    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4) if nb is None else nb
    known, setup = current(load_catalog(name)), current(load_catalog("setup"))

    def translate(text: str) -> str:
        return known.get(text, text)

    zh = copy.deepcopy(nb)
    settings = sync.course_settings()
    parameters_at = next((i for i, c in enumerate(zh.cells) if "parameters" in c.metadata.get("tags", [])), None)
    for index, cell in enumerate(zh.cells):
        tags = cell.metadata.get("tags", [])
        try:
            if "badges" in tags:
                cell.source = sync.badges_source(f"{LANGUAGE}/{name}", settings)
            elif "setup" in tags:
                cell.source = sync.setup_source(name, settings, LANGUAGE, lambda text: setup.get(text, text))
            elif cell.cell_type == "markdown":
                blocks = markdown_blocks(cell.source)
                cell.source = zh_links("\n".join(translate(block) if ok else block for block, ok in blocks))
            elif cell.cell_type == "code":
                cell.source = translate_code(cell.source, translate)
                if parameters_at is not None and index == parameters_at + 1:
                    cell.source = set_language(cell.source)
        except (TranslationError, SyntaxError) as error:
            raise TranslationError(f"{name} cell {index}: {error}") from error
    zh.metadata["language_info"] = dict(zh.metadata.get("language_info", {}))
    zh.metadata["freegpu"] = {"language": LANGUAGE, "source": f"notebooks/{name}.ipynb"}
    return zh


def notebook_names() -> list[str]:
    return sorted(path.stem for path in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


def write(names: list[str], check: bool = False) -> list[str]:
    """Write (or with `check`, compare) notebooks/zh/<name>.ipynb; the names that differ(ed)."""
    ZH_NOTEBOOKS.mkdir(exist_ok=True)
    differ = []
    for name in names:
        text = nbformat.writes(zh_notebook(name)) + "\n"
        path = ZH_NOTEBOOKS / f"{name}.ipynb"
        if not path.exists() or path.read_text() != text:
            differ.append(name)
            if not check:
                path.write_text(text)
    return differ


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["update", "write", "check"])
    parser.add_argument("names", nargs="*", help="notebook names; freegpu (the package), site (default: all)")
    args = parser.parse_args(argv)
    names = args.names or [*notebook_names(), *MESSAGE_CATALOGS]
    notebooks = [name for name in names if name not in MESSAGE_CATALOGS]
    if args.command == "update":
        update(names)
        return 0
    if args.command == "write":
        for name in write(notebooks):
            print(f"wrote notebooks/{LANGUAGE}/{name}.ipynb")
        return 0
    found = [p for name in names for p in problems(name)]
    found += [f"notebooks/{LANGUAGE}/{name}.ipynb is out of date: run `make sync`" for name in write(notebooks, True)]
    print("\n".join(found) or "every unit translated, every zh notebook up to date")
    return 1 if found else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))  # the siblings import as build.<name>, as in the tests
    sys.exit(main())
