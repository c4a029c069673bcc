"""The zh runs: each zh notebook, executed, records what the English run records and prints Chinese."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import nbformat
import pytest
from conftest import NOTEBOOK_NAMES

CJK = re.compile(r"[\u4e00-\u9fff]")


VOLATILE = re.compile(r"(^|_)(s|ms|us|µs|seconds|wall|time|times|timing|timings|speed|speedup|throughput|per_s|"
                      r"samples_per_s|rss|mb|bytes_peak|peak|load|started_at|at|ratio|share|overhead|cost|costs|"
                      r"trials|median|min|max|spread|ranking|top)(_|$)")
# Measured too, though their names do not say so: free disk, a cap set from the process's memory, the worker count a
# timing picked, a ratio of two timings, an output folder's size (its logs are text), what an epoch's time plans.
MEASURED = {"free_gib", "cap_bytes", "best_num_workers", "fixed_over_dynamic", "output_dir_bytes",
            "epochs_per_session", "epochs_per_week"}


def comparable(en, zh, path: str, volatile: bool = False) -> list[str]:
    """Where the zh run's results differ from the English run's, beyond text and what a clock measured."""
    if isinstance(en, dict) and isinstance(zh, dict):
        if sorted(en) != sorted(zh):
            return [f"{path}: keys differ: {sorted(set(en) ^ set(zh))}"]
        return [d for key in en for d in comparable(en[key], zh[key], f"{path}.{key}",
                                                    volatile or bool(VOLATILE.search(str(key).lower()))
                                                    or key in MEASURED)]
    if isinstance(en, list) and isinstance(zh, list):
        if len(en) != len(zh) and not volatile:
            return [f"{path}: {len(en)} items against {len(zh)}"]
        pairs = enumerate(zip(en, zh, strict=False))
        return [d for i, (x, y) in pairs for d in comparable(x, y, f"{path}[{i}]", volatile)]
    if isinstance(en, str) or isinstance(zh, str) or volatile:
        same = type(en) is type(zh) or None in (en, zh)
        return [] if same else [f"{path}: {type(en).__name__} -> {type(zh).__name__}"]
    if isinstance(en, float) and isinstance(zh, float) and math.isnan(en) and math.isnan(zh):
        return []
    return [] if en == zh else [f"{path}: {en!r} -> {zh!r}"]


def test_comparable_sees_a_changed_value_but_not_text_or_clocks():
    en, zh = {"loss": 0.5, "note": "a", "step_ms": 3.0}, {"loss": 0.5, "note": "乙", "step_ms": 4.0}
    assert comparable(en, zh, "r") == []
    assert comparable({"loss": 0.5}, {"loss": 0.6}, "r") == ["r.loss: 0.5 -> 0.6"]
    assert comparable({"loss": 0.5}, {"accuracy": 0.5}, "r")


def steady(keys) -> list[str]:
    """The headline keys no clock decides (which of a timing's keys a headline shows depends on whether it
    resolved in that run)."""
    return sorted(k for k in keys if not VOLATILE.search(k.lower()) and k not in MEASURED)


@pytest.mark.parametrize("name", NOTEBOOK_NAMES)
def test_zh_run_records_what_the_english_run_records(name, executed, executed_zh):
    """Smoke profile: the same keys; every value that is not text or a clock reading is the same."""
    _, en = executed(name)
    _, zh = executed_zh(name)
    skip = {"wall_s", "started_at", "parameters", "headline"}
    diffs = comparable({k: v for k, v in en.items() if k not in skip}, {k: v for k, v in zh.items() if k not in skip},
                       name)
    assert not diffs, "\n".join(diffs[:20])
    folders = en["parameters"].pop("output_dir"), zh["parameters"].pop("output_dir")  # zh/results/<name>
    assert en["parameters"] == zh["parameters"]
    assert [Path(folder).parts[-2:] for folder in folders] == [("results", name)] * 2
    assert Path(folders[1]).parent.parent.name == "zh" != Path(folders[0]).parent.parent.name
    assert steady(en["headline"]) == steady(zh["headline"])


@pytest.mark.parametrize("name", NOTEBOOK_NAMES)
def test_zh_run_prints_chinese(name, executed_zh):
    record, _ = executed_zh(name)
    nb = nbformat.read(executed_zh.out / record.executed, as_version=4)
    printed = [o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
               if o.get("output_type") == "stream"]
    assert any(CJK.search(text) for text in printed), f"{name}: no Chinese in what the zh notebook printed"
    solved = [c.source for c in nb.cells if "solution" in c.metadata.get("tags", [])]
    assert solved and any(CJK.search(source) for source in solved), f"{name}: its worked solutions ran in English"
    # Plots keep their axis text English (Colab's matplotlib has no CJK font): no glyph went missing drawing them.
    missing = [line for text in printed for line in text.splitlines() if "missing from font" in line]
    assert not missing, f"{name}: a plot drew text its font lacks: {missing[:3]}"
    assert json.dumps(nb.metadata.get("freegpu", {})) == json.dumps({"language": "zh",
                                                                       "source": f"notebooks/{name}.ipynb"})
