# One-command setup: `make test` and `make demo` create .venv, install the locked set and the data, then run.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
# The exact versions of every package (pyproject.toml declares ranges; CI runs `make test`, so it uses this lock).
LOCK    := constraints.txt
LATEST  := .venv-latest
FMNIST  := /usr/share/datasets/fashion-mnist
# Tests use few threads so that two pytest workers or a torchrun pair do not oversubscribe two cores.
export OMP_NUM_THREADS ?= 2

.PHONY: setup data scenes shapes test test-latest test-slow demo bench cards clean

setup: $(STAMP) data

$(STAMP): pyproject.toml $(LOCK)
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q -c $(LOCK) -e '.[train,test,bench]'
	touch $(STAMP)

data:
	@if [ ! -d $(FMNIST) ]; then \
		echo "installing dataset-fashion-mnist (Debian package)"; \
		apt-get update -qq && apt-get install -y -qq dataset-fashion-mnist; \
	fi

# The embedded training sets (written under data/, ignored by git).
scenes: setup
	$(BIN)/python tools/make_scenes.py --out data/fashion_scenes --seed 0 --num-train 10000 --num-val 500 --size 64

shapes: setup
	$(BIN)/python tools/make_shapes.py --out data/shapes --seed 0

test: setup
	$(BIN)/python -m pytest -q

# Not in CI: the newest versions pyproject.toml allows (no lock), in a venv of their own; versions.txt records them.
test-latest: data
	rm -rf $(LATEST)
	$(PY) -m venv $(LATEST)
	$(LATEST)/bin/pip install -q -e '.[train,test,bench]'
	$(LATEST)/bin/pip freeze --exclude-editable > $(LATEST)/versions.txt
	$(LATEST)/bin/python -m pytest -q

test-slow: setup
	$(BIN)/python -m pytest -q -m slow

demo: setup
	$(BIN)/python tools/demo.py

bench: setup
	$(BIN)/python tools/benchmark.py

cards: setup
	$(BIN)/python tools/make_cards.py

clean:
	rm -rf $(VENV) $(LATEST) work_dirs
