"""docs/zh/ (issue 19): the 纠错对照表 quotes the articles exactly and names steps that exist, the 中英术语表 covers
every English glossary term, locale/zh/glossary.tsv is its headings, and the pages build. No notebook runs.

The articles are copied into docs/zh/seeds/ (a clean clone has no ../shared beside it); a quote may restore
characters the scraped text lost, as `[补全: X]`, and must equal the article once those marks are removed."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import nbformat
import pytest
from conftest import NOTEBOOK_DIR, ROOT

ZH = ROOT / "docs" / "zh"
SEEDS = ZH / "seeds"
TEAM_SEEDS = ROOT.parent / "shared" / "seeds"  # where the team keeps them, beside the repository (not in CI)
VERDICTS = {"正确", "部分正确", "错误", "尚未检验"}
NOT_CHECKED = "尚未检验"
PLACE = re.compile(r"(\d\d) · 第 (\d+) 节")
STARTER = re.compile(r"起步笔记本 `(\w+)`")
RESTORED = re.compile(r"\[补全: ([^\]]*)\]")
ROW = re.compile(r"^\| 「(?P<quote>.+?)」(?P<notes>(?:\[\^\w+\])*) \| (?P<verdict>[^|]+?) \| (?P<why>[^|]+?) \| "
                 r"(?P<where>[^|]+?) \| (?P<evidence>[^|]+?) \|$")
ONLY_A_TEST = "仅测试"  # "where": no notebook step; the evidence names the test that runs it
# A step, linked to its page on the site (raw HTML: a build without that page, like tests/tooling/test_site.py's, only
# leaves a dead link, where a markdown link would stop Sphinx -W)
LINK = re.compile(r'<a href="notebooks/(\d\d)_\w+\.html">([^<]+)</a>')
ZH_HEADING = re.compile(r"^## (?P<zh>.+?) \((?P<en>.+)\)$")


def notebook_steps() -> dict[str, set[str]]:
    """Notebook number -> the numbers of its `## N.` steps, read from the English notebooks' markdown."""
    steps = {}
    for path in sorted(NOTEBOOK_DIR.glob("[0-9][0-9]_*.ipynb")):
        cells = nbformat.read(path, as_version=4).cells
        steps[path.name[:2]] = {m.group(1) for cell in cells if cell.cell_type == "markdown"
                                for m in re.finditer(r"^## (\d+)\. ", cell.source, re.M)}
    return steps


def claim_rows() -> list[dict[str, str]]:
    """Every row of claims.md, with the seed file its section (`## 文章 X：... (`NNN_....txt`)`) names."""
    rows, seed = [], None
    for line in (ZH / "claims.md").read_text().splitlines():
        if line.startswith("## "):
            named = re.search(r"`(\d{3}_\w+\.txt)`", line)
            seed = named.group(1) if named else None
        elif line.startswith("| 「"):
            match = ROW.match(line)
            assert match, f"a claims row the test cannot read: {line}"
            rows.append({**match.groupdict(), "seed": seed, "line": line})
    return rows


def glossary_sections() -> list[tuple[str, str, str]]:
    """(Chinese term, English term, the entry's text) for every `## 中文 (English)` section of the zh glossary."""
    sections = re.split(r"^(?=## )", (ZH / "glossary.md").read_text(), flags=re.M)[1:]
    found = []
    for section in sections:
        heading, body = section.split("\n", 1)
        match = ZH_HEADING.match(heading)
        assert match, f"not `## 中文术语 (English term)`: {heading}"
        found.append((match["zh"], match["en"], body))
    return found


def english_terms() -> list[str]:
    return re.findall(r"^## (.+)$", (ROOT / "docs" / "glossary.md").read_text(), flags=re.M)


def test_the_seed_articles_are_the_three_the_course_quotes():
    names = sorted(p.name for p in SEEDS.glob("*.txt"))
    assert [n[:3] for n in names] == ["000", "003", "004"], names
    if TEAM_SEEDS.is_dir():  # beside the repository: the copy is the articles as they are, byte for byte
        assert {n: (SEEDS / n).read_bytes() for n in names} == {
            n: (TEAM_SEEDS / n).read_bytes() for n in names if (TEAM_SEEDS / n).is_file()}


def test_restoration_marks_are_removed_before_comparing():
    assert RESTORED.sub("", "GPU[补全: （]T4 x2 或 P100[补全: ）]") == "GPUT4 x2 或 P100"
    assert RESTORED.sub("", "{ [补全: \"]model[补全: \"]: m }") == "{ model: m }"


def test_every_claim_is_quoted_exactly_from_its_article():
    rows, seeds = claim_rows(), {p.name: p.read_text() for p in SEEDS.glob("*.txt")}
    assert len(rows) >= 20 and {r["seed"] for r in rows} == set(seeds)
    for row in rows:
        quote = RESTORED.sub("", row["quote"])
        assert quote in seeds[row["seed"]], f"not in {row['seed']}: 「{quote}」"
        if RESTORED.search(row["quote"]):  # a restoration is marked, and a footnote says why
            assert row["quote"] not in seeds[row["seed"]] and row["notes"], row["line"]
    quotes = [r["quote"] for r in rows]
    assert len(quotes) == len(set(quotes)), "a claim is listed twice"


def test_the_claims_the_issue_names_as_unchecked_are_listed_as_such():
    unchecked = " ".join(r["quote"] for r in claim_rows() if r["verdict"] == NOT_CHECKED)
    for words in ("87秒缩短到63秒", "九小时", "双卡甚至可能比单卡慢"):  # only a GPU or a Kaggle account checks these
        assert words in unchecked, words


def test_every_verdict_is_allowed_and_every_checked_claim_names_a_step_that_exists():
    steps = notebook_steps()
    for row in claim_rows():
        verdict, where = row["verdict"], row["where"]
        assert verdict in VERDICTS, row["line"]
        assert row["why"].strip(), row["line"]
        if verdict == NOT_CHECKED or where == NOT_CHECKED:
            assert verdict == where == NOT_CHECKED, f"a verdict needs a step, a step a verdict: {row['line']}"
            continue
        if where == ONLY_A_TEST:
            continue  # tests/tooling/test_claims.py checks that the evidence names a test that exists
        for number, text in LINK.findall(where):
            assert text.startswith(f"{number} · "), f"a link to another notebook than its text: {where}"
            assert list(NOTEBOOK_DIR.glob(f"zh/{number}_*.ipynb")), where
        where = LINK.sub(r"\2", where)
        places = PLACE.findall(where)
        assert places and PLACE.sub("", where).strip(" ；;") == "", f"a place the test cannot read: {where}"
        for number, step in places:
            assert number in steps, f"no notebook {number}_*.ipynb: {row['line']}"
            assert step in steps[number], f"notebook {number} has no '## {step}.' step: {row['line']}"


def test_every_footnote_the_claims_use_is_defined():
    text = (ZH / "claims.md").read_text()
    used = set(re.findall(r"\[\^(\w+)\](?!:)", text))
    defined = set(re.findall(r"^\[\^(\w+)\]:", text, flags=re.M))
    assert used == defined and used


def test_the_zh_glossary_has_a_section_for_every_english_term():
    covered = [en for _, en, _ in glossary_sections()]
    assert [t for t in english_terms() if t not in covered] == []
    for term in ("混合精度", "损失缩放", "梯度累积", "激活检查点", "进程组", "全归约", "秩与世界大小"):
        assert term in [zh for zh, _, _ in glossary_sections()], term
    assert len(covered) == len(set(covered))


def test_every_zh_glossary_entry_says_where_it_is_taught_and_the_place_exists():
    steps = notebook_steps()
    for zh, en, body in glossary_sections():
        where = next((line for line in body.splitlines() if line.startswith("课程位置：")), None)
        assert where, f"{zh}: no 课程位置 line"
        places, starters = PLACE.findall(where), STARTER.findall(where)
        assert places or starters, f"{zh}: no notebook step or starter named"
        for number, step in places:
            assert step in steps.get(number, set()), f"{zh}: notebook {number} has no step {step}"
        for starter in starters:
            assert (ROOT / "starters" / f"{starter}.ipynb").is_file(), f"{zh}: no starter {starter}"
        assert where.count("第 ") == len(places), f"{zh}: a place the test cannot read: {where}"


def test_the_glossary_table_and_the_tsv_match_the_headings():
    headings = [(zh, en) for zh, en, _ in glossary_sections()]
    table = re.findall(r"^\| (?!中文 |---)([^|]+?) \| ([^|]+?) \| [^|]+ \|$", (ZH / "glossary.md").read_text(),
                       flags=re.M)
    assert table == headings
    lines = (ROOT / "locale" / "zh" / "glossary.tsv").read_text().splitlines()
    assert lines[0] == "en\tzh"
    assert [tuple(line.split("\t")) for line in lines[1:]] == [(en.replace("`", ""), zh.replace("`", ""))
                                                             for zh, en in headings]


def test_the_zh_front_page_keeps_the_markers_and_links_its_pages():
    text = (ZH / "index.md").read_text()
    assert text.count("<!-- course:build-line -->") == 1 and text.count("<!-- course:notebook-table -->") == 1
    targets = re.findall(r"\]\(([^)]+)\)", text)
    assert {"measurements.md", "glossary.md", "claims.md"} <= set(targets)
    for target in targets:
        assert "troubleshooting" not in target or target.startswith("https://github.com/"), target


def test_the_zh_pages_build_without_a_warning(tmp_path):
    """The pages as the builder stages them (build/course_site.py fills the markers), under Sphinx -W."""
    pytest.importorskip("sphinx")
    pytest.importorskip("myst_parser")
    src = tmp_path / "src"
    shutil.copytree(ZH, src)
    (src / "conf.py").write_text('extensions = ["myst_parser"]\nlanguage = "zh_CN"\n'
                                 'myst_enable_extensions = ["colon_fence", "attrs_inline"]\n'
                                 "myst_heading_anchors = 3\n")
    (src / "measurements.md").write_text("# 本次构建测量了什么\n")
    pages = sorted(p.stem for p in ZH.glob("*.md") if p.stem != "index")  # the builder's guides: every page
    toctree = "```{toctree}\n:hidden:\n\nmeasurements\n" + "\n".join(pages) + "\n```"
    index = (src / "index.md").read_text()
    (src / "index.md").write_text(index.replace("<!-- course:notebook-table -->", toctree)
                                  .replace("<!-- course:build-line -->", "构建于今天"))
    done = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-q",
                           str(src), str(tmp_path / "out")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "「enable_gpu决定这次运行拿不拿显卡」" in (tmp_path / "out" / "claims.html").read_text()
