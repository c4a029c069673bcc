"""The learner's path: every notebook with profile="full", on folders laid out as the Hugging Face Hub serves them.

A learner on a GPU session runs the full profile (`auto` resolves to it). Here it runs on the CPU, offline, on
small copies of MNIST, GLUE and a BERT-family model that build/hub_rehearsal.py writes in the Hub's own layout
and schema (parquet, `Image` and `ClassLabel` features, a model repository): the notebooks' real loading code runs
unchanged, only the bytes are stand-ins. Notebook 02 trains at width 64 instead of its full default of 512,
because fp16 autocast on a CPU is emulated: at width 512 its step 3 alone took over ten minutes on 2 cores.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import NOTEBOOK_NAMES

pytestmark = pytest.mark.notebook

MNIST_TRAIN, MNIST_TEST = 1200, 300  # build/hub_rehearsal.py's default sizes
EXTRA = {"02_mixed_precision": {"d_model": 64}}  # see the module docstring


# 07 reads no data, and its profile decides nothing it runs (test_07_full_profile_runs_what_the_smoke_profile_runs):
# its full profile would run the same CPU processes as the session's run (one run of 07 fewer: about 80 s).
@pytest.mark.parametrize("name", [name for name in NOTEBOOK_NAMES if not name.startswith("07")])
def test_full_profile_runs_on_hub_layout_folders(name, executed_full, hub_folders):
    record, results, out = executed_full(name, **EXTRA.get(name, {}))
    assert results["profile"] == "full" and results["parameters"]["profile"] == "full"
    assert results["device"] == "cpu" and results["platform"] == "headless"
    if "data_dir" in results["parameters"]:  # every notebook that reads a dataset takes it from a folder
        folder = results["parameters"]["data_dir"]
        assert folder in hub_folders.values()
        if "data_source" in results:
            assert f"data_dir={folder!r}" in results["data_source"]
    printed = "".join("".join(o.get("text", "")) for c in json.loads((out / record.executed).read_text())["cells"]
                      if c["cell_type"] == "code" for o in c["outputs"])
    assert "Traceback" not in printed


def test_01_full_profile_trains_mnist(executed_full):
    _, results, _ = executed_full("01_mnist_migration")
    assert (results["train_size"], results["eval_size"]) == (MNIST_TRAIN, MNIST_TEST)  # all of each split
    assert results["max_abs_loss_diff"] == 0.0 and results["max_abs_weight_diff"] == 0.0
    assert results["eval_accuracy"] >= 0.8 and results["eval_accuracy_reloaded"] == results["eval_accuracy"]
    assert results["gather_for_metrics_count"] == MNIST_TEST < results["gather_count"]
    assert results["script_launch_processes"] == 2  # the script read the same folder (--data_dir)


def test_02_full_profile_reads_28_rows(executed_full):
    _, results, _ = executed_full("02_mixed_precision", **EXTRA["02_mixed_precision"])
    assert "28x28" in results["data_source"]


def test_05_full_profile_fine_tunes_glue_from_folders(executed_full, hub_folders):
    _, results, _ = executed_full("05_bert_finetune")
    assert results["parameters"]["model_name"] == hub_folders["bert"]
    assert results["train_size"] == 160 and results["eval_size"] == 81  # the rehearsal's sst2 splits
    assert results["eval_count"] == results["eval_size"]
    assert 0.0 <= results["accuracy_before"] <= 1.0 and 0.0 <= results["accuracy_after"] <= 1.0


def test_06_full_profile_resumes_on_mnist(executed_full):
    _, results, _ = executed_full("06_kaggle_commit_workflow")
    assert results["steps_per_epoch"] == -(-MNIST_TRAIN // results["parameters"]["batch_size"])
    assert results["resume_max_abs_weight_diff"] == 0.0 and results["kill_during_save_recovered"] is True


def test_mnist_folder_has_the_hubs_schema(hub_folders):
    """The rehearsal folder is what `load_dataset("ylecun/mnist")` gets: features, split names, parquet files."""
    import datasets

    mnist = datasets.load_dataset(hub_folders["mnist"])
    assert set(mnist) == {"train", "test"} and len(mnist["train"]) == MNIST_TRAIN
    assert isinstance(mnist["train"].features["image"], datasets.Image)
    assert mnist["train"].features["label"].names == [str(i) for i in range(10)]
    # The crash of issue 16: in datasets >= 4 a column is lazy and has no reshape; load_mnist must not need one.
    column = mnist["train"].with_format("numpy")["image"]
    assert not isinstance(column, np.ndarray)
    from freegpu.data import load_mnist

    data = load_mnist("full", data_dir=hub_folders["mnist"])
    images, labels = data.train.tensors
    assert tuple(images.shape) == (MNIST_TRAIN, 784) and 0.0 <= float(images.min()) < float(images.max()) <= 1.0
    assert labels.tolist() == mnist["train"]["label"][:]


@pytest.mark.parametrize("task", ["sst2", "mrpc"])
def test_glue_folder_has_the_hubs_schema(hub_folders, task):
    from freegpu.data import GLUE_TASKS, load_text_task

    loaded = load_text_task("full", task, hub_folders["bert"], 0, hub_folders["glue"])
    fields, names = GLUE_TASKS[task]
    assert loaded.text_fields == fields and loaded.label_names == names
    assert loaded.train.features["label"].names == list(names) and "idx" not in loaded.train.column_names
    assert len(loaded.train) == 160 and len(loaded.eval) == 81


def test_check_source_names_the_value_and_the_fix(tmp_path, hub_folders):
    from freegpu.checks import check_source

    assert check_source("data_dir", "", hub_default="ylecun/mnist") == ""
    assert check_source("data_dir", hub_folders["mnist"], hub_default="ylecun/mnist") == hub_folders["mnist"]
    assert check_source("model_name", hub_folders["bert"], hub_default="bert-base-uncased", data=False)
    assert check_source("model_name", "google-bert/bert-base-uncased", hub_default="x", data=False)  # a Hub id
    with pytest.raises(ValueError, match=r"data_dir='/nowhere/mnist': no such folder.*ylecun/mnist"):
        check_source("data_dir", "/nowhere/mnist", hub_default="ylecun/mnist")
    with pytest.raises(ValueError, match=r"data_dir=.*holds no \.parquet"):
        check_source("data_dir", str(tmp_path), hub_default="ylecun/mnist")
    with pytest.raises(ValueError, match=r"model_name=.*no config\.json"):
        check_source("model_name", hub_folders["mnist"], hub_default="bert-base-uncased", data=False)


def test_require_hub_only_for_hub_ids(hub_folders):
    from freegpu.profile import require_hub

    require_hub("full", False, {"data_dir": hub_folders["mnist"]})  # a folder: no network needed
    with pytest.raises(RuntimeError, match=r"ylecun/mnist \(data_dir\).*give data_dir a folder"):
        require_hub("full", False, {"data_dir": "ylecun/mnist"})
    with pytest.raises(RuntimeError, match=r"bert-base-uncased \(model_name\)"):
        require_hub("full", False, {"data_dir": hub_folders["glue"], "model_name": "bert-base-uncased"})
