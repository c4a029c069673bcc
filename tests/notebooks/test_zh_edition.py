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
from conftest import NOTEBOOK_DIR, ROOT

from build import i18n
from build import sync_notebooks as sync

ZH_DIR = NOTEBOOK_DIR / "zh"
ZH_NAMES = sorted(p.stem for p in ZH_DIR.glob("[0-9][0-9]_*.ipynb"))


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


@pytest.mark.parametrize("language", ["en", "zh"])
def test_a_notebook_whose_extra_has_no_wheel_asks_for_internet_on_kaggle(language, tmp_path):
    """07 installs deepspeed, which pip builds from source: the wheelhouse cannot hold it (NO_WHEEL_EXTRAS), so
    the Kaggle message asks for Internet only and prints no wheelhouse line that would fail."""
    path = NOTEBOOK_DIR / ("" if language == "en" else "zh") / "07_beyond_one_machine.ipynb"
    message = last_error(run_offline(setup_cell(path), tmp_path, kaggle=True))
    assert KAGGLE_SAYS[language][0] in message and "deepspeed" in message, message
    assert "--find-links" not in message, message


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


# ---------------------------------------------------------------------------------------------- terms
GLOSSARY = [tuple(line.split("\t")) for line in (ROOT / "locale" / "zh" / "glossary.tsv").read_text().splitlines()[1:]]
# One word per concept (issue 27): what the zh prose must not say, and what it says instead (the glossary's word).
WRONG = {
    r"(?<![\w`/.-])[Nn]otebooks?(?![\w`/.-])": "笔记本",
    r"动量|滑动平均值|(?<!二阶)矩估计": "一阶矩和二阶矩估计 (AdamW's two states)",
    r"切分": "分片",
    r"激活(?!值|检查点|函数)": "激活值",
    r"(?<![\w`.])[Ss]calers?(?![\w`.(])": "缩放器",
    r"进程序号|进程编号": "秩",
    r"(?<![\w`/.])[Ee]pochs?(?![\w`/.(])": "轮",
    r"(?:GPU|CUDA) ?内核|(?:GPU|CUDA) ?上，[^。；，\n]{0,8}内核": "CUDA 算子（kernel）: 内核 is the Jupyter kernel",
}
CODE_SPAN = re.compile(r"`[^`\n]*`|\]\([^)]*\)|<[^>\n]+>|https?://\S+")
GLOSSED = re.compile(r"（[ -~]+）")  # English after its Chinese name: "混合精度（mixed precision）"


def prose(name: str) -> list[tuple[int, str]]:
    """(cell, text) of what a reader reads as words in the zh notebook: markdown outside code, and the comments,
    docstrings and printed strings of its code (identifiers, code spans and link targets taken out)."""
    found = []
    for index, cell in enumerate(nbformat.read(ZH_DIR / f"{name}.ipynb", as_version=4).cells):
        if "badges" in cell.metadata.get("tags", []):
            continue
        if cell.cell_type == "markdown":
            texts = [block for block, ok in i18n.markdown_blocks(cell.source) if ok]
        elif cell.cell_type == "code" and i18n.is_python(cell.source):
            body = i18n.mask_shell(i18n.split_magic(cell.source)[1])
            tree = ast.parse(body)
            texts = [i18n._template(node) for node in i18n.text_nodes(tree, english=False)]
            texts += [node.value for node in i18n.docstrings(tree, english=False)]
            texts += [t.string.lstrip("#") for t in tokenize.generate_tokens(io.StringIO(body).readline)
                      if t.type == tokenize.COMMENT]
        else:
            continue
        found += [(index, CODE_SPAN.sub(" ", re.sub(r"\{[^{}]*\}", " ", text))) for text in texts]
    return found


def term_findings(name: str) -> list[str]:
    found = []
    for index, text in prose(name):
        bare = GLOSSED.sub(" ", text)
        for pattern, right in WRONG.items():
            found += [f"cell {index}: {m.group()!r} -> {right}" for m in re.finditer(pattern, bare)]
        for english, chinese in GLOSSARY:
            if english.lower() in chinese.lower():
                continue  # the glossary keeps the English name (papermill, SIGKILL, gather_for_metrics...)
            for m in re.finditer(rf"(?<![\w`-]){re.escape(english)}(?![\w`-])", bare, flags=re.I):
                found.append(f"cell {index}: {m.group()!r} -> {chinese}")
    return found


# Findings a notebook may still have while its translation is under way: a ceiling that only goes down (none now).
TERMS_NOT_YET: dict[str, int] = {}


@pytest.mark.parametrize("name", ZH_NAMES)
def test_the_zh_prose_says_each_term_as_the_glossary_does(name):
    found = term_findings(name)
    assert len(found) <= TERMS_NOT_YET.get(name, 0), "\n".join(found)


# ---------------------------------------------------------------------------------------------- outputs
WORD = r"[A-Za-z]+(?:'[a-z]+)?"
# Three or more English words in a row, two of them joined by a plain space, two of three letters or more
# ("bf16 request warns: True"): a sentence or a label. Words joined only by ", " or ": " are identifiers and keys
# ("model, optimizer, dataloader"); "T x T" is a shape.
ENGLISH_RUN = re.compile(rf"(?<![\w./\\-]){WORD}(?:[ ,;:]+{WORD}(?![\w./(\\-])){{2,}}")
# Not prose: quoted text, code spans, URLs, paths, a library's log line or exception ("DistStoreError: Timed out
# after..."), a command line.
NOT_PROSE = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"|“[^”\n]*”|「[^」\n]*」|`[^`\n]*`|https?://\S+|(?<!\w)/[\w./-]+"
                       r"|^.*\[[\w.]+\.py:\d+:[^\]\n]*\].*$|^\s*[\w.]*(?:Error|Exception|Warning): .*$"
                       r"|(?:pip install|kaggle \w+ \w+) [\w .,\[\]=<>-]*", flags=re.M)
# English that a zh run may print, each for a reason (a tool's or a library's own words, or a name).
ALLOWED = {
    "Copy-and-paste the text below in your GitHub issue": "`accelerate env` prints it; 00 shows the tool's output",
    "Hugging Face Hub": "a product's name",
    "Launching training on": "notebook_launcher prints it ('Launching training on 2 CPUs.'); 01 step 4 reads it",
}


def printed(nb) -> list[tuple[int, str]]:
    """(cell, text) of what the run printed for a reader: stdout and each display's text (stderr is the libraries'
    warnings and logs, left as they wrote them)."""
    found = []
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if output.get("output_type") == "stream" and output.get("name") == "stdout":
                found.append((index, output.get("text", "")))
            elif output.get("output_type") in ("display_data", "execute_result"):
                data = output.get("data", {})
                text = data.get("text/markdown", data.get("text/plain", ""))
                found.append((index, "".join(text) if isinstance(text, list) else text))
    return found


def english_sentences(nb) -> list[str]:
    found = []
    for index, text in printed(nb):
        for m in ENGLISH_RUN.finditer(NOT_PROSE.sub(" ", text)):
            words = m.group()
            long_words = re.findall(r"[A-Za-z]{3,}", words)  # "T x T" is a shape, not a sentence
            allowed = any(a in words or words in a for a in ALLOWED)
            if re.search(r"[A-Za-z] [A-Za-z]", words) and len(long_words) >= 2 and not allowed:
                found.append(f"cell {index}: {words!r}")
    return found


# English a zh run may still print while its translation is under way: a ceiling that only goes down (none now).
ENGLISH_NOT_YET: dict[str, int] = {}


@pytest.mark.parametrize("name", ZH_NAMES)
def test_a_zh_run_prints_no_english_sentence(name, executed_zh):
    record, _ = executed_zh(name)
    found = english_sentences(nbformat.read(executed_zh.out / record.executed, as_version=4))
    assert len(found) <= ENGLISH_NOT_YET.get(name, 0), "\n".join(found)


def test_the_scan_names_english_and_spares_code_quotes_and_library_words():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("", outputs=[
        nbformat.v4.new_output("stream", name="stdout", text=(
            "not run: this notebook only shows the configuration\n"  # 03's old hard-coded sentence
            "| `Colab T4` | auto: fp16, bf16 request warns: True |\n"  # 02's old table label
            "模型 model, optimizer, dataloader 已准备好；'the same text in a ValueError'\n"
            "Launching training on 2 CPUs.\n"
            "torch.distributed.DistStoreError: Timed out after 6 seconds waiting for clients.\n"
            "[INFO] [real_accelerator.py:213:get_accelerator] Setting accelerator to CPU.\n"
            "形状 T x T；运行 pip install tensorboard 或 kaggle datasets create -p data\n"))])])
    assert english_sentences(nb) == ["cell 0: 'not run: this notebook only shows the configuration'",
                                     "cell 0: 'request warns: True'"]
