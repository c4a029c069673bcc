"""Kaggle bundles: a push-ready folder per notebook (`kernel-metadata.json`, checked) and the offline wheelhouse.

`make course` writes them to build/out/kaggle/ (`write_course_bundles`); `build/image_lane.py` runs the notebooks
from internet-off bundles. Notebook 06 teaches the same file as a visible dict. The fields and their checks
follow the `kaggle` CLI 2.2.5 (`kaggle_api_extended.py: kernels_push`), which validates a folder the same way
before it sends anything. Nothing here needs the CLI or a network: the checks are copied rather than called,
because `import kaggle` authenticates at once (it reads your token), and a push that passes them would really
upload.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
from pathlib import Path
from typing import Any

from freegpu.platform import kaggle_dataset_dirs

from .wheelhouse import build_image_wheelhouse, load_image

__all__ = ["slugify", "kernel_metadata", "validate_kernel_metadata", "setup_requirement", "course_extras",
           "offline_setup_source", "write_kernel_bundle", "dataset_metadata", "write_course_bundles"]

ROOT = Path(__file__).resolve().parents[1]

# What to ask `machine_shape` for. Without it, `enable_gpu: true` alone has meant a P100 (kaggle-cli issue #821),
# which Kaggle has retired (its image has no sm_60 kernels; the CLI warns when a push names it): name the shape.
MACHINE_SHAPES = {"gpu": "NvidiaTeslaT4", "tpu": "TpuV5E8", "cpu": None}  # T4 x2 (no single T4); TPU v5e-8
OWNER = "your-kaggle-username"  # a placeholder the learner replaces before pushing
RETIRED_SHAPES = {"nvidiateslap100", "tpuv38", "tpu1vmv38", "tpuv232", "tpuv2256"}
_SLUG = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_SETUP_MARK = "# Setup: written by build/sync_notebooks.py"
# Extras with no wheel on PyPI: pip builds them from source against the image's torch, so no wheelhouse can install
# them offline. A notebook that needs one (07: DeepSpeed) needs internet on Kaggle.
NO_WHEEL_EXTRAS = ("deepspeed",)  # the first line of every notebook's setup cell


def slugify(title: str) -> str:
    """A Kaggle slug for `title`: lowercase letters and digits joined by single hyphens."""
    return "-".join(re.findall(r"[a-z0-9]+", title.lower()))


def kernel_metadata(owner: str, title: str, code_file: str, *, accelerator: str = "gpu",
                    internet: bool = False, dataset_sources: list[str] | tuple = (),
                    kernel_sources: list[str] | tuple = (), private: bool = True) -> dict[str, Any]:
    """The `kernel-metadata.json` for pushing `code_file` (a notebook) as `owner/<slug of title>`.

    `accelerator` is `gpu` (T4 x2), `tpu` (v5e-8) or `cpu`. `internet` defaults to off, the state a batch run
    should be able to live with; the CLI's own default is on. `kernel_sources` attaches earlier runs' outputs
    (a previous version of this notebook: where its checkpoints come from).
    """
    shape = MACHINE_SHAPES[accelerator]
    meta = {"id": f"{owner}/{slugify(title)}", "title": title, "code_file": code_file, "language": "python",
            "kernel_type": "notebook", "is_private": private, "enable_gpu": accelerator == "gpu",
            "enable_tpu": accelerator == "tpu", "enable_internet": internet,
            "dataset_sources": list(dataset_sources), "competition_sources": [],
            "kernel_sources": list(kernel_sources), "model_sources": []}
    if shape:
        meta["machine_shape"] = shape
    return meta


def _source_problems(field: str, sources: Any) -> list[str]:
    if not isinstance(sources, list):
        return [f"{field} must be a list"]
    return [f"{field}: {s!r} is not owner/slug[/version]" for s in sources
            if not isinstance(s, str) or not 2 <= len(s.split("/")) <= 3 or not all(s.split("/")[:2])]


def validate_kernel_metadata(meta: dict[str, Any], folder: Path | None = None) -> list[str]:
    """What `kaggle kernels push` would reject in `meta` (and `folder`, if given), plus what would waste a run.

    Returns the problems; an empty list means valid. Beyond the CLI's checks: the slug must be well formed and
    match the title, `machine_shape` must not be retired (P100, TPU v2/v3), and a GPU or TPU must be named.
    """
    problems = []
    title, kernel_id, code_file = meta.get("title") or "", meta.get("id") or "", meta.get("code_file") or ""
    if len(title) < 5:
        problems.append("title must be at least five characters")
    if not code_file:
        problems.append("code_file is missing")
    elif folder is not None and not (Path(folder) / code_file).is_file():
        problems.append(f"code_file {code_file!r} is not in {folder}")
    parts = kernel_id.split("/")
    if len(parts) != 2 or not all(parts):
        problems.append(f"id {kernel_id!r} must be owner/slug, without a version")
    elif not _SLUG.fullmatch(parts[1]) or parts[1] != slugify(title):
        problems.append(f"id slug {parts[1]!r} must be the slug of the title, {slugify(title)!r}")
    if meta.get("language") not in ("python", "r", "rmarkdown"):
        problems.append("language must be python, r or rmarkdown")
    if meta.get("kernel_type") not in ("script", "notebook"):
        problems.append("kernel_type must be script or notebook")
    for field in ("dataset_sources", "kernel_sources"):
        problems += _source_problems(field, meta.get(field, []))
    if meta.get("docker_image_pinning_type") not in (None, "original", "latest"):
        problems.append("docker_image_pinning_type must be original or latest")
    shape = meta.get("machine_shape")
    if shape and shape.lower() in RETIRED_SHAPES:
        problems.append(f"machine_shape {shape!r} is retired; use {MACHINE_SHAPES['gpu']} or {MACHINE_SHAPES['tpu']}")
    if (meta.get("enable_gpu") or meta.get("enable_tpu")) and not shape:
        problems.append("enable_gpu/enable_tpu without machine_shape: that asked for a P100 or a TPU v3, both "
                        "retired; name the shape")
    notebook = Path(folder) / code_file if folder is not None and code_file else None
    if meta.get("enable_internet") is False and notebook is not None and notebook.is_file():
        cells = json.loads(notebook.read_text()).get("cells", [])
        setup = ["".join(c["source"]) for c in cells if "".join(c["source"]).startswith("# Setup")]
        if any("git+https://" in source for source in setup):
            problems.append(f"enable_internet is false, but {code_file} pip-installs from GitHub (git+https): "
                            "the run would fail in its first cell; write the bundle with a wheelhouse, or turn "
                            "internet on")
    return problems


def setup_requirement(notebook: Path) -> tuple[str, tuple[str, ...]]:
    """What the setup cell of `notebook` installs and checks: (`freegpu[<its extras>]`, the modules it needs).

    Read from the cell that build/sync_notebooks.py wrote from pyproject.toml (`[tool.freegpu.notebook-extras]`):
    the requirement it pip-installs from GitHub and its `NEEDS` tuple (freegpu and the module of each extra).
    """
    from packaging.requirements import InvalidRequirement, Requirement

    notebook = Path(notebook)
    cells = json.loads(notebook.read_text()).get("cells", [])
    setup = ["".join(c["source"]) for c in cells if "".join(c["source"]).startswith(_SETUP_MARK)]
    if len(setup) != 1:
        raise ValueError(f"{notebook.name} has {len(setup)} setup cells, not 1")
    tree = ast.parse(setup[0])
    needs = [node.value for node in ast.walk(tree) if isinstance(node, ast.Assign)
             and any(isinstance(t, ast.Name) and t.id == "NEEDS" for t in node.targets)]
    texts = [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)
             and " @ git+" in node.value]
    if len(needs) != 1 or len(texts) != 1:
        raise ValueError(f"{notebook.name}: its setup cell has {len(needs)} NEEDS and {len(texts)} git+ "
                         "requirements, not 1 each; run `make sync`")
    try:
        req = Requirement(texts[0])
    except InvalidRequirement as exc:
        raise ValueError(f"{notebook.name}: setup cell requirement {texts[0]!r}: {exc}") from None
    if req.name != "freegpu" or req.url is None:
        raise ValueError(f"{notebook.name}: setup cell installs {texts[0]!r}, not freegpu from a URL")
    return texts[0].split(" @ ")[0].strip(), tuple(ast.literal_eval(needs[0]))


def course_extras(notebooks: list[Path]) -> tuple[str, ...]:
    """Every extra that the setup cells of `notebooks` install, in order of first use, less NO_WHEEL_EXTRAS: what
    the wheelhouse serves."""
    extras: list[str] = []
    for notebook in notebooks:
        cells = json.loads(Path(notebook).read_text()).get("cells", [])
        if not any("".join(c["source"]).startswith(_SETUP_MARK) for c in cells):
            continue  # not a course notebook (no generated setup cell): it installs nothing
        spec = setup_requirement(notebook)[0]
        extras += [e for e in spec.partition("[")[2].rstrip("]").split(",") if e and e not in extras]
    return tuple(e for e in extras if e not in NO_WHEEL_EXTRAS)


def offline_setup_source(wheelhouse: str, requirement: str = "freegpu", needs: tuple[str, ...] = ("freegpu",),
                         input_dir: Path | str | None = None) -> str:
    """A setup cell for a kernel without internet: install `requirement` from the attached wheelhouse dataset.

    As the notebook's own setup cell does, it installs when any module of `needs` (freegpu and the modules of the
    notebook's extras) is missing. The dataset is looked for where Kaggle mounts it, in its newer layout and its
    older one (`kaggle_dataset_dirs`: pip skips a folder that does not exist), under `input_dir` if given (a
    rehearsal of Kaggle's input folder, see `platform.rehearsal_dirs`).
    """
    new, old = kaggle_dataset_dirs(wheelhouse, input_dir)
    names = ", ".join(f'"{name}"' for name in needs) + ("," if len(needs) == 1 else "")
    return ("# Setup for Kaggle without internet: written by build/kaggle_bundles.py.\n"
            f"# Installs the course helpers ({requirement}) from the wheelhouse dataset\n"
            f"# {wheelhouse}, attached in kernel-metadata.json (dataset_sources); pip never\n"
            "# looks for an index.\n"
            "import importlib\nimport importlib.util\nimport subprocess\nimport sys\n\n"
            f"NEEDS = ({names})\n"
            "if any(importlib.util.find_spec(name) is None for name in NEEDS):\n"
            "    # Kaggle mounts a dataset under datasets/<owner>/<slug> now, under <slug> in older sessions\n"
            '    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-index",\n'
            f'        "--find-links", "{new}",\n'
            f'        "--find-links", "{old}",\n'
            f'        "{requirement}"], check=True)\n'
            "    importlib.invalidate_caches()")


def write_kernel_bundle(notebook: Path, folder: Path, meta: dict[str, Any], wheelhouse: str | None = None, *,
                        input_dir: Path | str | None = None) -> Path:
    """Copy `notebook` into `folder` as `meta['code_file']` and write `kernel-metadata.json` beside it.

    With `wheelhouse` (a dataset id in `meta['dataset_sources']`), the copy's setup cell is replaced by
    `offline_setup_source`, which installs what the notebook's own setup cell does (freegpu with this notebook's
    extras) without internet; `input_dir` moves Kaggle's input folder for a rehearsal. Refuses metadata that
    `validate_kernel_metadata` rejects, such as internet off with a setup cell that installs from GitHub. The folder
    is what `kaggle kernels push -p` takes.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if wheelhouse is None:
        shutil.copyfile(notebook, folder / meta["code_file"])
    else:
        if wheelhouse not in meta.get("dataset_sources", []):
            raise ValueError(f"wheelhouse {wheelhouse!r} is not attached: add it to dataset_sources")
        requirement, needs = setup_requirement(notebook)
        content = json.loads(Path(notebook).read_text())
        setup = [c for c in content["cells"] if "".join(c["source"]).startswith(_SETUP_MARK)]
        setup[0]["source"] = offline_setup_source(wheelhouse, requirement, needs, input_dir).splitlines(keepends=True)
        (folder / meta["code_file"]).write_text(json.dumps(content, indent=1, ensure_ascii=False) + "\n")
    problems = validate_kernel_metadata(meta, folder)
    if problems:
        raise ValueError(f"kernel-metadata.json for {notebook.name}: " + "; ".join(problems))
    path = folder / "kernel-metadata.json"
    path.write_text(json.dumps(meta, indent=2) + "\n")
    return path


def dataset_metadata(owner: str, title: str) -> dict[str, Any]:
    """The `dataset-metadata.json` that `kaggle datasets create -p` needs (a private dataset, CC0)."""
    return {"title": title, "id": f"{owner}/{slugify(title)}", "licenses": [{"name": "CC0-1.0"}]}


def write_course_bundles(folder: Path, notebooks: list[Path], owner: str = OWNER, *, image: str = "kaggle-gpu",
                         python_version: str | None = None) -> list[Path]:
    """What `make course` writes to the `kaggle` folder of `build/out`: a push-ready folder per notebook, `wheelhouse`.

    Each notebook's folder holds the notebook and its `kernel-metadata.json` (TPU v5e-8 for notebook 04, T4 x2 for
    the others; internet on, because the setup cell installs freegpu from GitHub). `wheelhouse/` is the dataset for
    kernels that run without internet (notebook 06, step 5): the course's wheel plus every wheel that the
    notebooks' extras need and the Kaggle `image` lacks (versions in platforms/images.toml), for the image's
    Python unless `python_version` is given, with `manifest.json` and `dataset-metadata.json`. Returns the
    metadata files written.
    """
    folder = Path(folder)
    written = []
    for notebook in notebooks:
        title = notebook.stem.replace("_", " ")
        meta = kernel_metadata(owner, title, notebook.name, internet=True,
                               accelerator="tpu" if "_tpu_" in notebook.stem else "gpu")
        written.append(write_kernel_bundle(notebook, folder / slugify(title), meta))
    build_image_wheelhouse(folder / "wheelhouse", ROOT, load_image(ROOT / "platforms" / "images.toml", image),
                           course_extras(notebooks), python_version=python_version,
                           metadata=dataset_metadata(owner, "freegpu wheelhouse"))
    return written
