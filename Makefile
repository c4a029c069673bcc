# Two commands do all set-up on a fresh machine (see README):
#   make course   create .venv, install the pinned set, run every notebook headless, build build/out/
#   make test     same set-up, then the tests
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The tests prove the smoke profile never needs the Hugging Face Hub: any Hub call fails at once.
OFFLINE := HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1

.PHONY: course test lab sync pins clean

$(STAMP): pyproject.toml constraints.txt
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -c constraints.txt --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[nlp,dev]'
	touch $(STAMP)

course: $(STAMP)
	$(BIN)/python build/run_course.py

test: $(STAMP)
	$(OFFLINE) $(BIN)/python -m pytest

lab: $(STAMP)
	$(BIN)/jupyter lab notebooks

# Rewrite badges and setup cells from pyproject.toml and strip outputs (a test fails until this is done).
sync: $(STAMP)
	$(BIN)/python build/sync_notebooks.py

# Re-pin constraints.txt to what is installed in .venv (after changing a version on purpose).
pins: $(STAMP)
	{ sed -n '1,3p' constraints.txt; echo "pip==$$($(BIN)/python -m pip --version | cut -d' ' -f2)"; \
	  $(BIN)/python -m pip freeze --exclude-editable | sed 's/+cpu$$//'; } > constraints.txt.new
	mv constraints.txt.new constraints.txt

clean:
	rm -rf build/out
