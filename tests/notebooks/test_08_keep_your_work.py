"""Notebook 08 (keep your work): its results contract in the plain kernel, and a run in a Colab stand-in kernel.

The stand-in (tests/stubs/) is what Colab's kernel has that 08 uses: google.colab's kernel class (the kernel starts
with --IPKernelApp.kernel_class=google.colab._kernel.Kernel, as on Colab), `drive.mount` linking
`<mountpoint>/MyDrive` to a folder that plays Google Drive, and `userdata.get` of a planted token. There the
notebook mounts the simulated Drive, is killed mid-epoch, resumes from Drive and ends bit-exact, in both editions.
"""

from __future__ import annotations

import ast
import contextlib
import json
import sys
from pathlib import Path

import nbformat
import pytest
from conftest import NOTEBOOK_DIR, PLANTED_SECRETS, ROOT

from build import image_lane
from build import run_course as runner

NAME = "08_keep_your_work"
STUBS = ROOT / "tests" / "stubs"
COLAB_TOKEN = "hf_plantedColabSecret7531"  # what the stand-in's userdata.get("HF_TOKEN") returns
KAGGLE_TOKEN = "hf_plantedKaggleSecret86420"
STEPS_PER_EPOCH = 16  # 512 examples, batches of 32


def check_resume(r: dict) -> None:
    p = r["parameters"]
    assert r["steps_total"] == STEPS_PER_EPOCH * p["num_epochs"] == 48
    assert r["killed_exit_status"] == -9  # SIGKILL: no chance to save
    killed = r["killed_at_step"]
    assert p["kill_at_step"] <= killed < r["steps_total"] and killed % STEPS_PER_EPOCH != 0  # mid-epoch
    published = [name for name in r["checkpoints_after_kill"] if name.startswith("step_")]
    assert len(published) == 2  # the script keeps two
    assert r["resumed_from"] == max(published, key=lambda name: int(name[5:]))
    # The kill lands a moment after the report of kill_at_step (22 here): the newest checkpoint is step_20 unless
    # the run got past step 25 first, on a loaded machine.
    assert 0 < int(r["resumed_from"][5:]) <= killed
    assert r["resumed_exit_status"] == 0
    assert r["resume_bit_exact"] is True and r["resume_max_abs_diff"] == 0.0


@pytest.mark.notebook
def test_08_step1_platform_folders(notebook_run):
    _, r, _ = notebook_run
    colab, kaggle = r["platform_folders"]["colab"], r["platform_folders"]["kaggle"]
    assert colab["working"] == "/content" and colab["working_kept"] is False  # before Drive is mounted
    assert kaggle == {"input": "/kaggle/input", "working": "/kaggle/working", "working_kept": True,
                      "scratch": "/kaggle/temp"}


@pytest.mark.notebook
def test_08_step2_killed_mid_epoch_resumes_bit_exact_from_the_stand_in_folder(notebook_run):
    _, r, out = notebook_run
    assert r["drive_mounted"] is False  # not on Colab: a local folder stood in, and the notebook said so
    check_resume(r)
    keep = out / "MyDrive" / "freegpu" / NAME
    assert sorted(p.name for p in (keep / "killed").iterdir()) == ["final", "step_40", "step_45"]
    script = (out / "train.py").read_text()
    assert "freegpu" not in script and "save_state" in script and "skip_first_batches" in script
    executed = (out.parent.parent / "executed" / f"{NAME}.ipynb").read_text()
    assert "accelerate launch --cpu train.py --ckpt_dir" in executed  # the command line a learner types
    assert "Google Drive mounted: False" in executed


@pytest.mark.notebook
def test_08_step3_token_read_never_printed(notebook_run):
    _, r, out = notebook_run
    planted = PLANTED_SECRETS["HF_TOKEN"]  # conftest plants it in the kernel's environment
    assert r["hf_token_source"] == "os.environ" and r["hf_token_set"] is True
    assert r["hf_token_length"] == len(planted)
    executed = (out.parent.parent / "executed" / f"{NAME}.ipynb").read_text()
    assert planted not in executed and planted not in (out / "results.json").read_text()


@pytest.mark.notebook
def test_08_step4_kaggle_inputs_read_from_the_layout(notebook_run):
    _, r, out = notebook_run
    assert r["dataset_files"] == ["data.safetensors", "dataset-metadata.json"]
    assert r["dataset_metadata"]["id"] == f"{r['parameters']['kaggle_owner']}/keep-your-work-data"
    assert json.loads((out / "my-dataset" / "dataset-metadata.json").read_text()) == r["dataset_metadata"]
    assert r["kaggle_model_path"] == "/kaggle/input/models/your-kaggle-username/keep-your-work-mlp/pytorch/default/1"
    input_dir = out / "rehearsal" / "kaggle" / "input"  # Kaggle's layout of 2026: datasets/<owner>/<slug>
    dataset = input_dir / "datasets" / r["parameters"]["kaggle_owner"] / "keep-your-work-data"
    assert (dataset / "data.safetensors").is_file()
    assert r["input_model_equal"] is True and r["input_accuracy"] > 0.9  # learnable: far above a quarter


def hf_token_function():
    """The notebook's `hf_token` function, from its cell, as a function of this process."""
    nb = nbformat.read(NOTEBOOK_DIR / f"{NAME}.ipynb", as_version=4)
    source = next(c.source for c in nb.cells if c.source.startswith("def hf_token("))
    namespace: dict = {"os": __import__("os")}
    exec(compile(ast.parse(source), "hf_token", "exec"), namespace)  # noqa: S102 - the notebook's own cell
    return namespace["hf_token"]


def test_08_step3_kaggle_secrets_and_the_environment(tmp_path, monkeypatch):
    """Where google.colab is missing and kaggle_secrets is there (Kaggle), the token comes from Kaggle's secrets;
    where neither is, from the environment. A secret that is not set is None there, not an error that stops the
    notebook (Colab and Kaggle raise when asked for a secret they do not have)."""
    hf_token = hf_token_function()
    monkeypatch.setenv("HF_TOKEN", "hf_fromTheEnvironment")
    assert hf_token() == ("hf_fromTheEnvironment", "os.environ")
    monkeypatch.delenv("HF_TOKEN")
    assert hf_token() == (None, "os.environ")
    (tmp_path / "kaggle.json").write_text(json.dumps({"HF_TOKEN": KAGGLE_TOKEN}))
    monkeypatch.setenv("FREEGPU_STUB_KAGGLE_SECRETS", str(tmp_path / "kaggle.json"))
    monkeypatch.syspath_prepend(str(STUBS))
    monkeypatch.setitem(sys.modules, "google.colab", None)  # not Colab: importing it fails
    monkeypatch.delitem(sys.modules, "kaggle_secrets", raising=False)
    with stubs_forgotten():
        assert hf_token() == (KAGGLE_TOKEN, "kaggle_secrets")
        (tmp_path / "kaggle.json").write_text(json.dumps({}))
        assert hf_token() == (None, "kaggle_secrets")


def test_08_step3_colab_secret_missing(tmp_path, monkeypatch):
    """On Colab, userdata.get raises SecretNotFoundError for a secret that is not set: the notebook goes on."""
    hf_token = hf_token_function()
    (tmp_path / "userdata.json").write_text(json.dumps({}))
    monkeypatch.setenv("FREEGPU_STUB_USERDATA", str(tmp_path / "userdata.json"))
    monkeypatch.syspath_prepend(str(STUBS))
    for name in [m for m in sys.modules if m == "google" or m.startswith("google.")]:
        monkeypatch.delitem(sys.modules, name)
    with stubs_forgotten():
        assert hf_token() == (None, "google.colab.userdata")


@contextlib.contextmanager
def stubs_forgotten():
    """The stand-ins imported inside leave sys.modules after: a `google.colab` left there would make every later
    test in this process look like Colab to freegpu.platform (monkeypatch restores what it deleted, not what the
    test added)."""
    before = set(sys.modules)
    try:
        yield
    finally:
        for name in set(sys.modules) - before:
            if name.split(".")[0] in ("google", "kaggle_secrets"):
                del sys.modules[name]


@pytest.fixture(scope="module")
def colab_run(tmp_path_factory):
    """`colab_run(folder)` runs notebooks/<folder>/08 once in the Colab stand-in kernel; returns its record, results,
    output root and the folder that played Google Drive."""
    cache = {}

    def run(edition: str):
        if edition not in cache:
            root = tmp_path_factory.mktemp(f"colab_{edition}")
            (root / "userdata.json").write_text(json.dumps({"HF_TOKEN": COLAB_TOKEN}))
            env = {"PYTHONPATH": str(STUBS), "FREEGPU_STUB_DRIVE": str(root / "google_drive"),
                   "FREEGPU_STUB_USERDATA": str(root / "userdata.json")}
            image_lane.write_kernelspec(root / "jupyter", Path(sys.executable), env,
                                        extra_args=("--IPKernelApp.kernel_class=google.colab._kernel.Kernel",))
            notebook = NOTEBOOK_DIR / edition / f"{NAME}.ipynb" if edition else NOTEBOOK_DIR / f"{NAME}.ipynb"
            with pytest.MonkeyPatch.context() as patch:
                patch.setenv("JUPYTER_PATH", str(root / "jupyter"))
                for key, value in PLANTED_SECRETS.items():
                    patch.setenv(key, value)
                # The exercises' solutions run in the plain kernel's run; this one ends with Drive unmounted.
                record = runner.execute(notebook, root / "out", {"profile": "smoke", "drive_mount": str(root / "mnt")},
                                        solutions=False)
            assert record.status == "ok", f"{edition or 'en'} 08 under the Colab stand-in failed: {record.error}"
            results = json.loads((root / "out" / record.results).read_text())
            cache[edition] = record, results, root / "out", root / "google_drive"
        return cache[edition]

    return run


@pytest.mark.notebook
@pytest.mark.parametrize("edition", ["", "zh"])
def test_08_on_colab_mounts_drive_is_killed_resumes_from_drive_bit_exact(colab_run, edition):
    record, r, out, google_drive = colab_run(edition)
    assert r["platform"] == "colab"  # freegpu saw the google.colab kernel
    assert r["drive_mounted"] is True
    check_resume(r)
    keep = google_drive / "freegpu" / NAME  # on "Drive", not in the runtime's folders
    assert sorted(p.name for p in (keep / "killed").iterdir()) == ["final", "step_40", "step_45"]
    assert (keep / "unbroken" / "final" / "model.safetensors").is_file()
    assert not (Path(r["parameters"]["drive_mount"]) / "MyDrive").exists()  # flush_and_unmount ran
    assert r["hf_token_source"] == "google.colab.userdata" and r["hf_token_length"] == len(COLAB_TOKEN)
    texts = [(out / record.executed).read_text(), (out / record.results).read_text()]
    for secret in (COLAB_TOKEN, *PLANTED_SECRETS.values()):
        assert all(secret not in text for text in texts)
    assert r["input_model_equal"] is True
