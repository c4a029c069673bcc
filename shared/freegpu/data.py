"""Datasets the notebooks train on: one call, the same structure in the smoke and the full profile.

Introduced in notebook 01 (MNIST migration).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .i18n import tr

__all__ = ["ImageData", "MNIST_HUB_ID", "load_mnist"]


@dataclass(frozen=True)
class ImageData:
    """Flattened grey-scale images scaled to [0, 1] and their labels, split into train and eval.

    Args:
        train (`torch.utils.data.TensorDataset`): `(images (N, num_features) float32, labels (N,) int64)`.
        eval (`torch.utils.data.TensorDataset`): the same, for evaluation.
        num_features (`int`): pixels per image (64 for the 8x8 digits, 784 for 28x28 MNIST).
        num_classes (`int`): 10.
        source (`str`): where the data came from.
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
                         images.shape[1], 10, tr("sklearn.datasets.load_digits (8x8, offline)"))
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
        where = (tr("the folder data_dir={data_dir!r}").format(data_dir=data_dir) if data_dir
                 else tr("the Hugging Face Hub"))
        return ImageData(_tensors(*split["train"]), _tensors(*split["test"]), split["train"][0].shape[1], 10,
                         tr("{hub_id} from {where} (28x28)").format(hub_id=MNIST_HUB_ID, where=where))
    raise ValueError(tr("profile={profile!r} is not allowed here; choose 'smoke' or 'full' (resolve 'auto' "
                        "first)").format(profile=profile))
