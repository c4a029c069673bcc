"""docs/glossary.md, the site's glossary: the terms the course uses, each with the notebook step (or starter) that
teaches it. The places must exist, and the page must build on the (strict) course site."""

from __future__ import annotations

import re

import nbformat
from conftest import NOTEBOOK_DIR, ROOT

from build import course_site

GLOSSARY = ROOT / "docs" / "glossary.md"
# "03 · Memory tricks, step 6, *Beyond one card: ...*": the notebook's number and title (before any ":"), the step
# and its heading.
PLACE = re.compile(r"(\d\d) · ([^,;*]+?), step (\d+), \*([^*]+)\*")
STARTER = re.compile(r"starter `(\w+)`")
# What issue 17 asks the glossary to explain, each as words its heading must contain.
TERMS = ["DDP", "all-reduce", "rank and world size", "local rank", "gloo and NCCL", "fork and spawn",
         "process group", "XLA compile and recompile", "mixed precision", "gradient accumulation",
         "activation checkpointing", "ZeRO stages and FSDP", "gather_for_metrics", "dynamic padding", "warm-up",
         "Save Version", "wheelhouse"]


def entries() -> dict[str, str]:
    """Heading -> the entry's text, whitespace folded (a place may wrap over two lines)."""
    sections = re.split(r"^## ", GLOSSARY.read_text(), flags=re.M)[1:]
    return {s.splitlines()[0]: " ".join(s.split("\n", 1)[1].split()) for s in sections}


def notebook_steps() -> dict[str, tuple[str, dict[str, str]]]:
    """Number -> (the notebook's title, {step number: heading}), read from the notebooks' markdown."""
    found = {}
    for path in sorted(NOTEBOOK_DIR.glob("[0-9][0-9]_*.ipynb")):
        lines = [line for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "markdown"
                 for line in cell.source.splitlines()]
        title = next(line[2:] for line in lines if line.startswith("# "))
        steps = dict(m.groups() for m in map(re.compile(r"^## (\d+)\. (.+)$").match, lines) if m)
        found[path.name[:2]] = title, steps
    return found


def test_every_entry_says_where_it_is_taught_and_the_place_exists():
    notebooks, checked = notebook_steps(), 0
    for term, text in entries().items():
        where = text[text.index("Where: "):]
        places, starters = PLACE.findall(where), STARTER.findall(where)
        assert places or starters, f"{term}: no notebook step or starter named"
        for number, name, step, heading in places:
            assert number in notebooks, f"{term}: no notebook {number}"
            title, steps = notebooks[number]
            assert title.split(":")[0] == f"{number} · {name}", f"{term}: notebook {number} is {title!r}"
            assert steps.get(step) == heading, f"{term}: {number} step {step} is {steps.get(step)!r}, not {heading!r}"
            checked += 1
        for starter in starters:
            assert (ROOT / "starters" / f"{starter}.ipynb").is_file(), f"{term}: no starter {starter}"
        assert where.count(" step ") == len(places), f"{term}: a place the test cannot read: {where}"
    assert checked >= len(TERMS)


def test_the_glossary_explains_the_terms_the_course_uses():
    headings = [h.lower() for h in entries()]
    assert [t for t in TERMS if not any(t.lower() in h for h in headings)] == []
    assert list(entries()) == sorted(entries(), key=lambda h: h.strip("`").lower())  # alphabetical


def test_the_glossary_reads_in_short_sentences():
    """Learners read English as a second language: at most 18 words a sentence on average, none over 30."""
    prose = " ".join(text[:text.index("Where: ")] for text in entries().values())
    sentences = [s.split() for s in re.split(r"[.!?:](?:\s|$)", prose) if s.strip()]
    assert sum(map(len, sentences)) / len(sentences) <= 18
    assert max(map(len, sentences)) <= 30, max(sentences, key=len)


def test_the_glossary_page_builds_on_the_site(tmp_path):
    """The site copies docs/*.md and lists each page under "Reference"; the build fails on any warning."""
    from test_site import fake_course, text_of  # needs the site extra

    out = fake_course(tmp_path)
    course_site.build(out, repo_root=tmp_path)
    page = text_of((out / "site" / "glossary.html").read_text())
    assert 'href="glossary.html"' in (out / "site" / "index.html").read_text()
    for term in entries():
        assert term.strip("`").split(" (")[0] in page, term
