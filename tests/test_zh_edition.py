"""The Chinese edition, finished for its readers (issue 27): Kaggle's first step in the reader's language, and zh
notebooks that link the zh pages and keep code words whole.

- The setup cell, run with no network and a module missing: on Kaggle it says what to do in the notebook's
  language (turn Internet on, or install from the attached wheelhouse with the one line it prints); elsewhere it
  links the troubleshooting page of its language.
- Every zh notebook links the zh glossary (docs/zh/glossary.md, at a heading that exists), never the English one.
- No code word is cut by line wrapping: neither a string split into pieces mid-word nor an inline code span
  broken over two markdown lines.
"""

from __future__ import annotations

import ast
import io
import re
import subprocess
import sys
import tokenize

import nbformat
import pytest
from conftest import NOTEBOOK_DIR, ROOT, load_build_script

ZH_DIR = NOTEBOOK_DIR / "zh"
ZH_NAMES = sorted(p.stem for p in ZH_DIR.glob("[0-9][0-9]_*.ipynb"))
sync = load_build_script("sync_notebooks")
i18n = load_build_script("i18n")


def setup_cell(path) -> str:
    cells = nbformat.read(path, as_version=4).cells
    return next(c.source for c in cells if "setup" in c.metadata.get("tags", []))


def run_offline(source: str, tmp_path, kaggle: bool) -> subprocess.CompletedProcess:
    """Run a setup cell as Python with a module it needs missing and no network: pip finds no index, git cannot
    reach GitHub (its URL rewritten to a folder that does not exist), and anything installed would land in tmp."""
    source = re.sub(r"^NEEDS = .*$", 'NEEDS = ("freegpu", "no_such_module_issue27")', source, count=1, flags=re.M)
    gitconfig = tmp_path / "gitconfig"
    gitconfig.write_text(f'[url "file://{tmp_path}/no-such-mirror/"]\n\tinsteadOf = https://github.com/\n')
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PIP_INDEX_URL": "http://127.0.0.1:9/",
           "PIP_NO_CACHE_DIR": "1", "PIP_RETRIES": "0", "PIP_TIMEOUT": "2", "PIP_TARGET": str(tmp_path / "site"),
           "PIP_DISABLE_PIP_VERSION_CHECK": "1", "GIT_CONFIG_GLOBAL": str(gitconfig), "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_TERMINAL_PROMPT": "0", "PYTHONIOENCODING": "utf-8"}
    if kaggle:
        env["KAGGLE_KERNEL_RUN_TYPE"] = "Interactive"
    return subprocess.run([sys.executable, "-c", source], env=env, capture_output=True, text=True, timeout=120)


def last_error(run: subprocess.CompletedProcess) -> str:
    lines = [line for line in run.stderr.splitlines() if line.startswith("RuntimeError: ")]
    assert run.returncode != 0 and lines, run.stderr[-2000:]
    return lines[-1].removeprefix("RuntimeError: ")


# What each language's message must say: the Internet switch and the phone, the wheelhouse's install line.
KAGGLE_SAYS = {"en": ("Turn on Internet", "phone-verified", "freegpu-wheelhouse"),
               "zh": ("打开 Internet", "验证手机号", "freegpu-wheelhouse", "数据集添加为输入")}
PAGE = {"en": sync.TROUBLESHOOTING, "zh": sync.TROUBLESHOOTING_ZH}


@pytest.mark.parametrize("language", ["en", "zh"])
@pytest.mark.parametrize("name", ["00_environment_check", "05_bert_finetune"])  # no extras; the most extras
def test_the_setup_cell_says_what_to_do_offline_in_the_notebooks_language(name, language, tmp_path):
    path = NOTEBOOK_DIR / (f"{name}.ipynb" if language == "en" else f"zh/{name}.ipynb")
    source = setup_cell(path)
    spec = "freegpu" + (f"[{','.join(e)}]" if (e := sync.course_settings()["extras"][name]) else "")
    message = last_error(run_offline(source, tmp_path, kaggle=True))
    for words in KAGGLE_SAYS[language]:
        assert words in message, (words, message)
    line = f"!pip install --no-index --find-links {sync.KAGGLE_WHEELHOUSE} '{spec}'"
    assert message.endswith(line), message  # the one line to run, with this notebook's extras
    elsewhere = last_error(run_offline(source, tmp_path, kaggle=False))
    assert elsewhere.endswith(f"/blob/main/{PAGE[language]}") and "Internet" not in elsewhere, elsewhere
    assert (ROOT / PAGE[language]).is_file()
    if language == "zh":
        assert not re.search(r"[A-Za-z]{3,} [a-z]{3,} [a-z]{3,}", message.replace(line, "")), message


def test_the_setup_messages_have_their_chinese():
    assert i18n.problems("setup") == []


@pytest.mark.parametrize("name", ZH_NAMES)
def test_the_zh_setup_cell_is_the_english_one_in_chinese(name):
    english, chinese = setup_cell(NOTEBOOK_DIR / f"{name}.ipynb"), setup_cell(ZH_DIR / f"{name}.ipynb")
    assert ast.dump(ast.parse(english)).count("Constant") == ast.dump(ast.parse(chinese)).count("Constant")
    assert sync.TROUBLESHOOTING_ZH in chinese and sync.TROUBLESHOOTING not in chinese, "run build/sync_notebooks.py"


def markdown(name: str) -> list[tuple[int, str]]:
    return [(i, c.source) for i, c in enumerate(nbformat.read(ZH_DIR / f"{name}.ipynb", as_version=4).cells)
            if c.cell_type == "markdown"]


@pytest.mark.parametrize("name", ZH_NAMES)
def test_zh_notebooks_link_the_zh_glossary_at_a_heading_it_has(name):
    anchors = set(i18n.zh_glossary_anchors().values())
    for index, source in markdown(name):
        assert "docs/glossary.md" not in source, f"{name} cell {index} links the English glossary"
        for anchor in re.findall(r"docs/zh/glossary\.md#([^)\s]+)", source):
            assert anchor in anchors, f"{name} cell {index}: the zh glossary has no heading #{anchor}"


def literal_body(token: str) -> str:
    """The text between a string literal's quotes, as written (escapes not read)."""
    body = token.lstrip("rRbBfFuU")
    quote = body[:3] if body[:3] in ('"""', "'''") else body[:1]
    return body[len(quote):-len(quote)]


def split_words(source: str) -> list[str]:
    """Each place where a string written in pieces (implicit concatenation over lines) is cut inside a word."""
    found, previous = [], None
    masked = i18n.mask_shell(i18n.split_magic(source)[1])
    for token in tokenize.generate_tokens(io.StringIO(masked).readline):
        if token.type in (tokenize.NL, tokenize.COMMENT):
            continue
        if token.type == tokenize.STRING and previous is not None:
            end, start = literal_body(previous), literal_body(token.string)
            if end and start and not re.search(r"\\.$", end) and i18n._inside_word(end[-1] + start[0], 1):
                found.append(f"{end[-12:]!r} + {start[:12]!r}")
        previous = token.string if token.type == tokenize.STRING else None
    return found


@pytest.mark.parametrize("name", ZH_NAMES)
def test_no_code_word_is_cut_by_line_wrapping(name):
    cells = nbformat.read(ZH_DIR / f"{name}.ipynb", as_version=4).cells
    cut = [f"cell {i}: {where}" for i, c in enumerate(cells) if c.cell_type == "code" and i18n.is_python(c.source)
           for where in split_words(c.source)]
    english = nbformat.read(NOTEBOOK_DIR / f"{name}.ipynb", as_version=4)
    words = set(re.findall(r"[\w.-]+", "\n".join(c.source for c in english.cells)))
    for index, source in markdown(name):  # a markdown line break reads as a space: "bf" + "16" shows "bf 16"
        lines = source.split("\n")
        for line, after in zip(lines, lines[1:], strict=False):
            tail, head = re.search(r"[\w.-]*$", line).group(), re.match(r"[\w.-]*", after).group()
            if tail and head and tail + head in words and tail not in words | {""}:
                cut.append(f"cell {index}: {tail!r} + {head!r} (one word, {tail + head!r}, cut by a line break)")
    assert not cut, cut
