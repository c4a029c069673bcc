"""freegpu.profile, freegpu.results and freegpu.software."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from freegpu import profile, results, software


def test_resolve_profile_refuses_unknown_names():
    with pytest.raises(ValueError, match=r"profile='fastest'.*'auto', 'smoke', 'full'"):
        profile.resolve_profile("fastest", "cpu")


@pytest.mark.parametrize("asked, device, expected", [
    ("auto", "cpu", "smoke"), ("auto", "cuda", "full"), ("auto", "tpu", "full"),
    ("smoke", "cuda", "smoke"), ("full", "cpu", "full"),
])
def test_resolve_profile(asked, device, expected):
    assert profile.resolve_profile(asked, device) == expected


def test_full_profile_offline_fails_fast_and_says_what_to_do():
    with pytest.raises(RuntimeError, match=r"profile='smoke'"):
        profile.require_hub("full", internet=False)
    profile.require_hub("full", internet=True)
    profile.require_hub("smoke", internet=False)


def test_run_writes_common_keys(tmp_path):
    run = results.start_run("00_environment_check", "smoke", "headless", "cpu", tmp_path)
    run.record(accuracy=0.5, shape=(2, 3), path=Path("/x"))
    data = json.loads(run.save().read_text())
    assert {"notebook", "profile", "platform", "device", "versions", "started_at", "wall_s"} <= set(data)
    assert data["versions"]["torch"] and data["versions"]["python"]
    assert data["accuracy"] == 0.5 and data["shape"] == [2, 3] and data["path"] == "/x"
    with pytest.raises(ValueError, match="written by Run"):
        run.record(wall_s=1)
    assert data["headline"] == []
    with pytest.raises(KeyError, match="loss"):
        run.highlight("accuracy", "loss")
    run.highlight("accuracy")
    assert json.loads(run.save().read_text())["headline"] == ["accuracy"]


def test_show_displays_the_headline_unless_asked_for_everything(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "IPython", None)  # plain text, as in a log
    run = results.start_run("00_environment_check", "smoke", "headless", "cpu", tmp_path)
    run.record(accuracy=0.5, raw_bytes=123456789)
    run.show()  # nothing highlighted: every value
    assert "`raw_bytes`" in capsys.readouterr().out
    run.highlight("accuracy")
    run.show()
    shown = capsys.readouterr().out
    assert "`accuracy`" in shown and "raw_bytes" not in shown
    run.show(everything=True)
    assert "`raw_bytes`" in capsys.readouterr().out


def test_failed_write_keeps_the_previous_file(tmp_path):
    target = tmp_path / "results.json"
    results.write_json_atomic(target, {"ok": 1})
    with pytest.raises(ValueError):
        results.write_json_atomic(target, {"bad": math.nan})  # NaN is not JSON
    with pytest.raises(TypeError):
        results.write_json_atomic(target, {"bad": object()})
    assert json.loads(target.read_text()) == {"ok": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]  # no temp files left behind


def test_markdown_table():
    table = results.markdown_table({"a": 0.123456, "b": [1, 2], "c": "x|y"})
    assert "| `a` | 0.1235 |" in table and "| `b` | 1, 2 |" in table and "x\\|y" in table


def test_secret_names():
    for name in ["HF_TOKEN", "WANDB_API_KEY", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "KAGGLE_KEY_APIKEY"]:
        assert software.is_secret_name(name), name
    for name in ["PJRT_DEVICE", "KAGGLE_KERNEL_RUN_TYPE", "CUDA_VISIBLE_DEVICES"]:
        assert not software.is_secret_name(name), name


def test_environment_signals_redact_values():
    env = {"HF_TOKEN": "hf_abcdef", "HF_HOME": "/h", "PJRT_DEVICE": "TPU", "HOME": "/root"}
    signals = software.environment_signals(env)
    # Values only for the allow-list; every other relevant name is listed with the mark.
    assert signals == {"HF_HOME": software.REDACTED, "HF_TOKEN": software.REDACTED, "PJRT_DEVICE": "TPU"}
    assert software.redact("token is hf_abcdef", env) == f"token is {software.REDACTED}"
