#!/usr/bin/env python3
"""Draw the course's three diagrams as small SVGs, in English and Chinese (issue 27: where a picture beats prose).

    python build/diagrams.py             # (re)write docs/_static/diagrams/{en,zh}/*.svg
    python build/diagrams.py --check     # exit 1 if a committed SVG differs from what this script draws
    python build/diagrams.py --markdown  # the markdown line each notebook pastes, per diagram and edition

ddp_allreduce.svg          DDP on 2 ranks: each runs forward and backward on its shard, all-reduce averages the
                           gradients, both take the same step (notebook 01, the DDP step).
zero_stages.svg            what each of 2 ranks keeps of weights, gradients and AdamW state under DDP and ZeRO
                           stages 1, 2, 3, counted in fp32: 4 + 4 + 8 bytes per parameter (as notebook 07 measures).
accumulation_timeline.svg  gradient accumulation over 4 micro-batches: no all-reduce under no_sync, one optimizer
                           step per 4 (notebook 03).

Text stays text (svg.fonttype "none"): a browser draws the Chinese with its own fonts, so no CJK font is needed
here. A fixed svg.hashsalt and no date make the files the same on every run. Notebooks show them by an absolute
raw.githubusercontent.com URL built from pyproject.toml's Repository and branch, which Colab, Kaggle, JupyterLab
and the site all load.
"""

from __future__ import annotations

import argparse
import io
import sys
import tomllib
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "_static" / "diagrams"
LANGUAGES = ("en", "zh")
NAMES = ("ddp_allreduce", "zero_stages", "accumulation_timeline")
MAX_BYTES = 60_000

# Colours: one per kind of thing, the same in every diagram.
WEIGHTS, GRADS, ADAM, DATA, COMM, STEP, EMPTY = ("#4c78a8", "#f58518", "#54a24b", "#bab0ac", "#e45756", "#72b7b2",
                                                  "#ffffff")

TEXT = {
    "en": {
        "ddp_title": "DDP on 2 ranks: one step",
        "batch": "batch of 16 samples", "shard": "shard {r}: 8 samples",
        "rank": "rank {r}", "copy": "rank {r}: a full copy of the model", "fwd": "forward + backward\non shard {r}",
        "grad": "gradients g{r}", "allreduce": "all-reduce: every rank gets (g0 + g1) / 2",
        "step": "optimizer step\n(the same update)", "same": "weights stay identical on both ranks",
        "zero_title": "What each of 2 ranks keeps (fp32: 4 + 4 + 8 bytes per parameter)",
        "weights": "weights 4 B", "grads": "gradients 4 B", "adam": "AdamW state 8 B",
        "rows": ("DDP", "ZeRO-1", "ZeRO-2", "ZeRO-3"),
        "kept": "{b} B per parameter\non each rank", "half": "hatched: the other rank's half, not kept here",
        "acc_title": "Gradient accumulation: 4 micro-batches, one optimizer step",
        "micro": "micro-batch {i}", "fb": "forward +\nbackward", "add": ".grad += g{i}",
        "nosync": "no_sync: gradients add up locally,\nno all-reduce",
        "sync": "all-reduce\n(averaged)", "opt": "optimizer step\n+ zero_grad", "time": "time",
        "loss": "each backward uses loss / 4, so the sum is the mean over the 4 micro-batches",
    },
    "zh": {
        "ddp_title": "两个秩上的 DDP：一步",
        "batch": "一批 16 个样本", "shard": "分片 {r}：8 个样本",
        "rank": "秩 {r}", "copy": "秩 {r}：一份完整的模型副本", "fwd": "在分片 {r} 上\n前向 + 反向",
        "grad": "梯度 g{r}", "allreduce": "全归约：每个秩都得到 (g0 + g1) / 2",
        "step": "优化器步\n（同样的更新）", "same": "两个秩上的权重保持一致",
        "zero_title": "两个秩各自保存什么（fp32：每个参数 4 + 4 + 8 字节）",
        "weights": "权重 4 B", "grads": "梯度 4 B", "adam": "AdamW 状态 8 B",
        "rows": ("DDP", "ZeRO-1", "ZeRO-2", "ZeRO-3"),
        "kept": "每个秩上\n每个参数 {b} B", "half": "斜线：另一个秩的那一半，这里不保存",
        "acc_title": "梯度累积：4 个微批次，一次优化器步",
        "micro": "微批次 {i}", "fb": "前向 +\n反向", "add": ".grad += g{i}",
        "nosync": "no_sync：梯度在本地累加，\n不做全归约",
        "sync": "全归约\n（取平均）", "opt": "优化器步\n+ zero_grad", "time": "时间",
        "loss": "每次反向用 loss / 4，所以总和就是 4 个微批次的平均",
    },
}


def _setup():
    import matplotlib

    matplotlib.use("svg")
    matplotlib.rcParams.update({
        "svg.fonttype": "none",  # text stays <text>: searchable, translatable, drawn with the reader's fonts
        "svg.hashsalt": "freegpu-diagrams",  # clip-path ids the same on every run
        "font.family": "sans-serif",  # the browser's own CJK fonts, by name, before its generic fallback
        "font.sans-serif": ["DejaVu Sans", "Arial", "Noto Sans CJK SC", "PingFang SC", "Microsoft YaHei"],
        "font.size": 10,
        "path.simplify": True,
    })


def _box(ax, x, y, w, h, text, color, *, hatch=None, size=9, text_color="black"):
    from matplotlib.patches import Rectangle

    ax.add_patch(Rectangle((x, y), w, h, facecolor=color, edgecolor="#333333", linewidth=0.8, hatch=hatch))
    lines = text.split("\n") if text else []
    step = size * 0.16  # one line of text in axis units (10 units per inch, 72 points per inch)
    for i, line in enumerate(lines):  # one <text> per line, each centred by the browser (text-anchor: middle)
        ax.text(x + w / 2, y + h / 2 + step * ((len(lines) - 1) / 2 - i), line, ha="center", va="center",
                fontsize=size, color=text_color)


def _arrow(ax, x0, y0, x1, y1):
    ax.annotate("", xy=(x1, y1), xytext=(x0, y0), arrowprops={"arrowstyle": "->", "color": "#333333", "lw": 1})


def _figure(width, height):
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(width, height))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width * 10)
    ax.set_ylim(0, height * 10)
    ax.axis("off")
    return fig, ax


def ddp_allreduce(t: dict):
    fig, ax = _figure(7.0, 5.0)
    ax.text(35, 47, t["ddp_title"], ha="center", fontsize=12, weight="bold")
    _box(ax, 10, 40, 50, 4.5, t["batch"], DATA)
    for r, x in enumerate((5, 38)):
        _arrow(ax, 35, 40, x + 13.5, 37)
        _box(ax, x, 32.5, 27, 4.5, t["shard"].format(r=r), DATA, size=8)
        _box(ax, x, 25, 27, 5, t["copy"].format(r=r), WEIGHTS, text_color="white", size=8)
        _box(ax, x, 18, 27, 5, t["fwd"].format(r=r), "#e8e8e8", size=8)
        _box(ax, x + 4, 13, 19, 3.5, t["grad"].format(r=r), GRADS, size=8)
        _arrow(ax, x + 13.5, 32.5, x + 13.5, 30)
        _arrow(ax, x + 13.5, 25, x + 13.5, 23)
        _arrow(ax, x + 13.5, 18, x + 13.5, 16.5)
        _arrow(ax, x + 13.5, 13, x + 13.5, 11.6)
        _arrow(ax, x + 13.5, 9, x + 13.5, 8)
        _box(ax, x, 3.5, 27, 4.5, t["step"].format(r=r), STEP, size=8)
    _box(ax, 5, 9, 60, 2.6, t["allreduce"], COMM, size=8, text_color="white")
    ax.text(35, 0.6, t["same"], ha="center", va="bottom", fontsize=8, style="italic")
    return fig


def zero_stages(t: dict):
    fig, ax = _figure(8.4, 4.6)
    ax.text(42, 43, t["zero_title"], ha="center", fontsize=11, weight="bold")
    # (weights, gradients, AdamW) split over the 2 ranks? One row per stage.
    split = {"DDP": (False, False, False), "ZeRO-1": (False, False, True), "ZeRO-2": (False, True, True),
             "ZeRO-3": (True, True, True)}
    widths = (4, 4, 8)  # bytes per parameter, drawn to scale: 1 byte = 1.5 units
    for key, (label, color) in enumerate(((t["weights"], WEIGHTS), (t["grads"], GRADS), (t["adam"], ADAM))):
        _box(ax, 12 + key * 22, 36, 4, 3, "", color)
        ax.text(17 + key * 22, 37.5, label, va="center", fontsize=8)
    for r in range(2):
        ax.text(24 + r * 30, 32, t["rank"].format(r=r), ha="center", fontsize=9, weight="bold")
    for row, name in enumerate(t["rows"]):
        y = 25 - row * 7
        ax.text(1, y + 2, name, va="center", fontsize=9, weight="bold")
        kept = 0
        for r in range(2):
            x = 3 + r * 30
            for part, (size, color) in enumerate(zip(widths, (WEIGHTS, GRADS, ADAM), strict=True)):
                w = size * 1.5
                if split[name][part]:  # each rank keeps its half: rank 0 the left half, rank 1 the right
                    mine, other = (0, w / 2) if r == 0 else (w / 2, 0)
                    _box(ax, x + 9 + mine, y, w / 2, 4, "", color)
                    _box(ax, x + 9 + other, y, w / 2, 4, "", EMPTY, hatch="///")
                    kept += size / 2 if r == 0 else 0
                else:
                    _box(ax, x + 9, y, w, 4, "", color)
                    kept += size if r == 0 else 0
                x += w
        for i, line in enumerate(t["kept"].format(b=f"{kept:g}").split("\n")):  # one <text> per line
            ax.text(68, y + 2.7 - 1.5 * i, line, va="center", fontsize=9)
    ax.text(42, 1.5, t["half"], ha="center", fontsize=8, style="italic")
    return fig


def accumulation_timeline(t: dict):
    fig, ax = _figure(8.0, 3.6)
    ax.text(40, 33, t["acc_title"], ha="center", fontsize=11, weight="bold")
    for i in range(4):
        x = 2 + i * 15
        ax.text(x + 6.5, 27, t["micro"].format(i=i + 1), ha="center", fontsize=8)
        _box(ax, x, 19, 13, 6, t["fb"], "#e8e8e8", size=8)
        _box(ax, x + 1, 15, 11, 3, t["add"].format(i=i + 1), GRADS, size=7)
    _box(ax, 2, 8, 43, 5, t["nosync"], DATA, size=8)
    _box(ax, 47, 8, 13, 5, t["sync"], COMM, size=8, text_color="white")
    _box(ax, 63, 15, 15, 10, t["opt"], STEP, size=8)
    _arrow(ax, 60, 10.5, 63, 15.5)
    _arrow(ax, 2, 5, 78, 5)
    ax.text(78, 3.5, t["time"], ha="right", va="top", fontsize=8)
    ax.text(40, 0.5, t["loss"], ha="center", va="bottom", fontsize=8, style="italic")
    return fig


DRAW = {"ddp_allreduce": ddp_allreduce, "zero_stages": zero_stages, "accumulation_timeline": accumulation_timeline}


def render(name: str, language: str) -> bytes:
    """The SVG of diagram `name` in `language`, byte for byte the same on every run."""
    import matplotlib.pyplot as plt

    _setup()
    fig = DRAW[name](TEXT[language])
    buffer = io.StringIO()
    with warnings.catch_warnings():  # matplotlib's fonts lack CJK glyphs; the browser's fonts draw them
        warnings.simplefilter("ignore")
        fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": "build/diagrams.py"})
    plt.close(fig)
    return buffer.getvalue().encode()


def path(name: str, language: str) -> Path:
    return OUT / language / f"{name}.svg"


def url(name: str, language: str) -> str:
    """The diagram's absolute URL on the repository's branch (pyproject.toml), which every platform can load."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    owner_repo = project["project"]["urls"]["Repository"].rstrip("/").removeprefix("https://github.com/")
    branch = project["tool"]["freegpu"]["branch"]
    return (f"https://raw.githubusercontent.com/{owner_repo}/{branch}/"
            f"{path(name, language).relative_to(ROOT).as_posix()}")


ALT = {  # short, one sentence each: it counts in the notebook's prose, and shows where the picture cannot load
    "en": {"ddp_allreduce": "DDP on 2 ranks: each computes gradients on its shard; all-reduce averages them.",
           "zero_stages": "Bytes per parameter on each of 2 ranks: DDP 16, ZeRO-1 12, ZeRO-2 10, ZeRO-3 8.",
           "accumulation_timeline": "Gradient accumulation: 4 micro-batches under no_sync, then one all-reduce and "
                                    "one optimizer step."},
    "zh": {"ddp_allreduce": "两个秩上的 DDP：每个秩在自己的分片上算梯度，全归约取平均。",
           "zero_stages": "两个秩上每个参数各占的字节：DDP 16，ZeRO-1 12，ZeRO-2 10，ZeRO-3 8。",
           "accumulation_timeline": "梯度累积：4 个微批次在 no_sync 下累加，然后一次全归约、一次优化器步。"},
}


def markdown(name: str, language: str) -> str:
    """The line a notebook's markdown cell holds to show the diagram."""
    return f"![{ALT[language][name]}]({url(name, language)})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a committed SVG differs")
    parser.add_argument("--markdown", action="store_true", help="print each diagram's markdown line")
    args = parser.parse_args(argv)
    if args.markdown:
        for name in NAMES:
            for language in LANGUAGES:
                print(f"{name} {language}: {markdown(name, language)}")
        return 0
    stale = []
    for name in NAMES:
        for language in LANGUAGES:
            svg, target = render(name, language), path(name, language)
            if len(svg) > MAX_BYTES:
                raise SystemExit(f"{target}: {len(svg)} bytes, over {MAX_BYTES}")
            if args.check:
                if not target.exists() or target.read_bytes() != svg:
                    stale.append(str(target.relative_to(ROOT)))
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(svg)
    if stale:
        print("differs from what build/diagrams.py draws (run it and commit):", *stale, sep="\n  ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
