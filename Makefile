# One-command setup: `make test` and `make demo` create .venv, install the pinned set and the data, then run.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
FMNIST  := /usr/share/datasets/fashion-mnist
# Tests use few threads so that two pytest workers or a torchrun pair do not oversubscribe two cores.
export OMP_NUM_THREADS ?= 2

.PHONY: setup data scenes shapes test test-slow demo bench cards clean

setup: $(STAMP) data

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q -e '.[train,test,bench]'
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

test-slow: setup
	$(BIN)/python -m pytest -q -m slow

demo: setup
	$(BIN)/python tools/demo.py

bench: setup
	$(BIN)/python tools/benchmark.py

cards: setup
	$(BIN)/python tools/make_cards.py

clean:
	rm -rf $(VENV) work_dirs
