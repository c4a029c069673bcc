"""build/diagrams.py: the three diagrams, committed as drawn, small, with their text kept as text in both editions."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib

from conftest import ROOT

from build import diagrams


def test_committed_svgs_are_what_the_script_draws():
    done = subprocess.run([sys.executable, str(ROOT / "build" / "diagrams.py"), "--check"], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def test_each_svg_is_small_dateless_and_keeps_its_text():
    for name in diagrams.NAMES:
        for language in diagrams.LANGUAGES:
            svg = diagrams.path(name, language).read_text(encoding="utf-8")
            assert len(svg.encode()) < diagrams.MAX_BYTES
            assert "<dc:date>" not in svg and "Matplotlib v" not in svg  # nothing that changes between runs
            texts = re.findall(r"<text[^>]*>([^<]+)</text>", svg)  # svg.fonttype "none": words, not glyph paths
            title = diagrams.TEXT[language][{"ddp_allreduce": "ddp_title", "zero_stages": "zero_title",
                                             "accumulation_timeline": "acc_title"}[name]]
            assert title in texts, (name, language)
            assert bool(re.search(r"[\u4e00-\u9fff]", "".join(texts))) == (language == "zh")


def test_zero_diagram_counts_what_notebook_07_measures():
    """fp32 bytes per parameter on each of 2 ranks: weights 4, gradients 4, AdamW 8, split by stage."""
    svg = diagrams.path("zero_stages", "en").read_text(encoding="utf-8")
    assert [int(b) for b in re.findall(r">(\d+) B per parameter<", svg)] == [16, 12, 10, 8]
    assert [4 + 4 + 8, 4 + 4 + 8 / 2, 4 + 4 / 2 + 8 / 2, (4 + 4 + 8) / 2] == [16, 12, 10, 8]


def test_markdown_lines_point_at_the_repository_branch():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    repo = project["project"]["urls"]["Repository"].removeprefix("https://github.com/").rstrip("/")
    line = diagrams.markdown("ddp_allreduce", "zh")
    assert line.endswith(f"(https://raw.githubusercontent.com/{repo}/{project['tool']['freegpu']['branch']}"
                         "/docs/_static/diagrams/zh/ddp_allreduce.svg)")
    assert line.startswith("![") and "秩" in line
