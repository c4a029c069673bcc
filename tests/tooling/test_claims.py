"""docs/zh/claims.md (issue 26): every article claim has evidence or says what would check it, and the two claims
no notebook step checks any more are checked here.

tests/tooling/test_zh_docs.py reads the rows (quotes exact, steps that exist); this file checks the evidence column."""

from __future__ import annotations

import ast
import difflib
import json
import re
import subprocess
import sys

import nbformat
from conftest import NOTEBOOK_DIR, ROOT
from test_zh_docs import NOT_CHECKED, ONLY_A_TEST, claim_rows

KINDS = ("本次运行", "测试运行", "库源码", "模拟", "文档")
NEEDS = re.compile(r"^需要 ?(GPU|两块 GPU|P100|TPU|平台账号)")  # what an unchecked claim waits for
TEST = re.compile(r"`(tests/(?:\w+/)?\w+\.py)(?:::(\w+))?`")


def test_every_claim_has_evidence_or_says_what_would_check_it():
    rows = claim_rows()
    assert len(rows) >= 50
    for row in rows:
        evidence = row["evidence"]
        if row["verdict"] == NOT_CHECKED:
            assert NEEDS.match(evidence), f"an unchecked claim must say what would check it: {row['line']}"
            continue
        kind = evidence.split(" · ")[0]
        assert kind in KINDS, f"evidence of an unknown kind: {row['line']}"
        named = TEST.findall(evidence)
        assert named or kind == "文档", f"checked, but by no test: {row['line']}"
        if row["where"] == ONLY_A_TEST:
            assert kind == "测试运行" and named, row["line"]
        for path, name in named:
            assert (ROOT / path).is_file(), f"no {path}: {row['line']}"
            if name:
                assert re.search(rf"^def {name}\(", (ROOT / path).read_text(), re.M), f"no {path}::{name}"


def test_unchecked_claims_are_only_those_a_gpu_or_a_platform_account_checks():
    unchecked = [r for r in claim_rows() if r["verdict"] == NOT_CHECKED]
    assert unchecked and all(NEEDS.match(r["evidence"]) for r in unchecked)
    gpu = [r for r in unchecked if "build/device_check.py" in r["evidence"]]
    assert len(gpu) >= 5  # memory, speed, accuracy, overhead, the T4: measured when a GPU is lent


def _function(name: str, notebook: str) -> str:
    for cell in nbformat.read(NOTEBOOK_DIR / f"{notebook}.ipynb", as_version=4).cells:
        if cell.cell_type != "code" or cell.source.startswith("%%"):
            continue
        for node in ast.parse(cell.source).body:
            if isinstance(node, ast.FunctionDef) and node.name == name:
                return ast.get_source_segment(cell.source, node)
    raise AssertionError(f"no {name} in {notebook}")


def test_01_step_2_diff_adds_4_lines_and_removes_5():
    """'只需要添加5行代码': 01 step 2 prints this diff (the same difflib call); 4 lines in, 5 out, plus the
    `Accelerator()` the caller creates."""
    plain, accelerated = (_function(name, "01_mnist_migration").splitlines()
                          for name in ("train_plain", "train_accelerate"))
    diff = list(difflib.unified_diff(plain, accelerated, lineterm="", n=1))[2:]
    added = [line for line in diff if line.startswith("+")]
    removed = [line for line in diff if line.startswith("-")]
    assert (len(added), len(removed)) == (4, 5), diff
    assert sum("# NEW" in line for line in added) == 2  # prepare and backward; the others are the signature/loss


def test_profile_writes_a_chrome_trace_per_process_only_with_a_folder(tmp_path):
    """'会生成timeline.json': Accelerate writes `profile_<process index>.json` (a Chrome trace) and only when
    `ProfileKwargs(output_trace_dir=...)` is set."""
    script = (
        "import json, os, sys, torch\n"
        "from accelerate import Accelerator\n"
        "from accelerate.utils import ProfileKwargs\n"
        "folder = sys.argv[1]\n"
        "accelerator = Accelerator(cpu=True, kwargs_handlers=[ProfileKwargs(activities=['cpu'], "
        "output_trace_dir=os.path.join(folder, 'traces'))])\n"
        "with accelerator.profile():\n"
        "    torch.randn(64, 64) @ torch.randn(64, 64)\n"
        "with accelerator.profile(ProfileKwargs(activities=['cpu'])):\n"  # no folder: nothing written
        "    torch.randn(8, 8) @ torch.randn(8, 8)\n"
        "traces = sorted(os.listdir(os.path.join(folder, 'traces')))\n"
        "print(json.dumps(sorted(os.listdir(folder))), json.dumps(traces))\n")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    top, traces = (json.loads(part) for part in done.stdout.split())
    assert top == ["traces"] and traces == ["profile_0.json"]
    trace = json.loads((tmp_path / "traces" / "profile_0.json").read_text())
    assert "traceEvents" in trace  # the Chrome trace format
    assert not list(tmp_path.rglob("timeline.json"))
