# Two commands do all set-up on a fresh machine (see README):
#   make course   create .venv, install the pinned set, run every notebook headless, build build/out/
#   make test     every environment (built side by side), then the tests: the main, XLA and image lanes
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The tests prove the smoke profile never needs the Hugging Face Hub: any Hub call fails at once.
OFFLINE := HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1

# The XLA lane: torch_xla 2.9.0 pairs with torch 2.9.0 only, so it gets its own environment. Everything else
# follows constraints.txt; these two pins replace its torch pin (the first install downloads several GB).
XLA_VENV := .venv-xla
XLA_PINS := torch==2.9.0 torch_xla==2.9.0
XLA_STAMP := $(XLA_VENV)/.installed

# The platform image lanes: a venv per image of platforms/images.toml (its versions, torch the CPU build above
# instead of the image's, no freegpu), built on first use; the notebooks then install the course there as their
# setup cell does on Colab, and as an internet-off Kaggle bundle's does from the wheelhouse (build/image_lane.py).
IMAGE_VENVS := .venv-images
IMAGE_LANES := colab-gpu kaggle-gpu
IMAGE_STAMPS := $(IMAGE_LANES:%=$(IMAGE_VENVS)/%/.installed)

.PHONY: course test venvs test-main test-xla test-images lab sync i18n pins clean

# DeepSpeed (notebook 07) builds from its source package against the torch installed: wheel and ninja first (~10 s).
$(STAMP): pyproject.toml constraints.txt
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -c constraints.txt --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[hub,nlp,smoke-bert,dev,site]'
	$(BIN)/python -m pip install --quiet -c constraints.txt wheel ninja
	$(BIN)/python -m pip install --quiet -c constraints.txt --no-build-isolation deepspeed
	touch $(STAMP)

# Notebook 04 also runs in the XLA lane (.venv-xla, built on first use); `make course NO_XLA=1` skips that lane.
course: $(STAMP) $(if $(NO_XLA),,$(XLA_STAMP))
	$(BIN)/python build/run_course.py $(if $(NO_XLA),,--xla-python $(XLA_VENV)/bin/python)

# The environments first, side by side (their downloads overlap: the XLA one is several GB), then the lanes in turn
# (side by side they would share 2 cores and slow each other's timed steps).
test:
	$(MAKE) -j3 venvs
	$(MAKE) test-main test-xla test-images

venvs: $(STAMP) $(XLA_STAMP) $(IMAGE_STAMPS)

test-main: $(STAMP)
	$(BIN)/ruff check .
	$(OFFLINE) $(BIN)/python -m pytest

$(XLA_STAMP): pyproject.toml constraints.txt
	$(PY) -m venv $(XLA_VENV)
	{ grep -v '^torch==' constraints.txt; printf '%s\n' $(XLA_PINS); } > $(XLA_VENV)/constraints.txt
	$(XLA_VENV)/bin/python -m pip install --quiet -c $(XLA_VENV)/constraints.txt --upgrade pip
	$(XLA_VENV)/bin/python -m pip install --quiet -c $(XLA_VENV)/constraints.txt $(XLA_PINS) -e '.[dev,hub,nlp,smoke-bert]'
	touch $(XLA_STAMP)

# Notebook 04's TPU half, notebook 05's fine-tuning steps and the TPU starter, run for real by XLA's CPU backend.
test-xla: $(XLA_STAMP)
	$(OFFLINE) PJRT_DEVICE=CPU FREEGPU_XLA_LANE=1 $(XLA_VENV)/bin/python -m pytest tests/lanes/test_xla_lane.py tests/lanes/test_xla_lane_05.py tests/lanes/test_xla_lane_02.py \
	  tests/lanes/test_starters.py::test_kaggle_tpu_v5e8_on_xla

# Notebook 05's loop against transformers' Trainer on the same work, interleaved in one process (a benchmark, not a
# test): samples/s of each and their ratio, with spreads, in build/out/bench/trainer_vs_course.json.
.PHONY: bench
bench: $(STAMP)
	$(OFFLINE) $(BIN)/python build/bench_trainer.py

$(IMAGE_VENVS)/%/.installed: platforms/images.toml | $(STAMP)
	$(BIN)/python build/image_lane.py venv $*

# 01 and 05 per image: on Colab's installed from the tag of a local mirror, on Kaggle's from the wheelhouse offline.
test-images: $(STAMP) $(IMAGE_STAMPS)
	$(OFFLINE) FREEGPU_IMAGE_LANES=1 $(BIN)/python -m pytest tests/lanes/test_image_lanes.py

lab: $(STAMP)
	$(BIN)/jupyter lab notebooks

# Rewrite badges and setup cells from pyproject.toml and strip outputs, then write the Chinese edition
# (notebooks/zh/) from the English and locale/zh/*.po (a test fails until this is done).
sync: $(STAMP)
	$(BIN)/python build/sync_notebooks.py
	$(BIN)/python build/i18n.py write

# After an English change: refresh the catalogs (msgmerge keeps the old translation as fuzzy) and list what is
# left to translate; translate the msgstr in locale/zh/*.po and shared/freegpu/locale/zh.po, then `make sync`.
i18n: $(STAMP)
	$(BIN)/python build/i18n.py update
	-$(BIN)/python build/i18n.py check

# Re-pin constraints.txt to what is installed in .venv (after changing a version on purpose).
pins: $(STAMP)
	{ sed -n '1,3p' constraints.txt; echo "pip==$$($(BIN)/python -m pip --version | cut -d' ' -f2)"; \
	  $(BIN)/python -m pip freeze --exclude-editable | sed 's/+cpu$$//'; } > constraints.txt.new
	mv constraints.txt.new constraints.txt

clean:
	rm -rf build/out
