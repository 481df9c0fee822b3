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

.PHONY: setup data scenes scenes40k scenes80k scenes-tune shapes test test-latest test-slow demo demo-train weights bench cards clean

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

# The embedded data sets (written under data/, ignored by git; deterministic: the same bytes on every machine). The
# bundled checkpoints were trained and are tested on them.
SCENES  := data/fashion_scenes/.complete
SHAPES  := data/shapes/.complete
# Four times the training scenes (same generator and seed: the first 10,000 and the validation scenes are the ones
# above), which the bundled seg recipe (the configs named fashion-scenes40k) trains on; not made by `make test`.
SCENES40K := data/fashion_scenes40k/.complete
# Eight times (its first 40,000 are those of scenes40k), for the 48,000-iteration study configs (fashion-scenes80k).
SCENES80K := data/fashion_scenes80k/.complete
# 500 scenes of another seed, in none of the sets above: where `make_weights.py --refine` chooses the affinity walk.
SCENESTUNE := data/fashion_scenes_tune/.complete

$(SCENES): tools/make_scenes.py | $(STAMP) data
	$(BIN)/python tools/make_scenes.py --out data/fashion_scenes --seed 0 --num-train 10000 --num-val 500 --size 64
	touch $@

$(SCENES40K): tools/make_scenes.py | $(STAMP) data
	$(BIN)/python tools/make_scenes.py --out data/fashion_scenes40k --seed 0 --num-train 40000 --num-val 500 --size 64
	touch $@

$(SCENES80K): tools/make_scenes.py | $(STAMP) data
	$(BIN)/python tools/make_scenes.py --out data/fashion_scenes80k --seed 0 --num-train 80000 --num-val 500 --size 64
	touch $@

$(SCENESTUNE): tools/make_scenes.py | $(STAMP) data
	$(BIN)/python tools/make_scenes.py --out data/fashion_scenes_tune --seed 1 --num-train 500 --num-val 0 --size 64
	touch $@

$(SHAPES): tools/make_shapes.py | $(STAMP)
	$(BIN)/python tools/make_shapes.py --out data/shapes --seed 0
	touch $@

scenes: $(SCENES)
scenes40k: $(SCENES40K)
scenes80k: $(SCENES80K)
scenes-tune: $(SCENESTUNE)
shapes: $(SHAPES)

test: setup $(SCENES) $(SHAPES)
	$(BIN)/python -m pytest -q

# Not in CI: the newest versions pyproject.toml allows (no lock), in a venv of their own; versions.txt records them.
test-latest: data
	rm -rf $(LATEST)
	$(PY) -m venv $(LATEST)
	$(LATEST)/bin/pip install -q -e '.[train,test,bench]'
	$(LATEST)/bin/pip freeze --exclude-editable > $(LATEST)/versions.txt
	$(LATEST)/bin/python -m pytest -q

test-slow: setup $(SCENES) $(SHAPES)
	$(BIN)/python -m pytest -q -m slow

# The main job: score the bundled checkpoints of every mixer on every task, print the table, draw pictures.
demo: setup $(SCENES) $(SHAPES)
	$(BIN)/python tools/demo.py

# Train every *_vit_micro briefly on Fashion-MNIST from scratch and compare the mixers.
demo-train: setup
	$(BIN)/python tools/train_demo.py

# Retrain the 20 bundled checkpoints from their configs (pretrained/, results/; docs/weights.md says how long).
weights: setup $(SCENES) $(SCENES40K) $(SHAPES)
	$(BIN)/python tools/make_weights.py
	$(BIN)/python tools/make_cards.py

bench: setup
	$(BIN)/python tools/benchmark.py

cards: setup
	$(BIN)/python tools/make_cards.py

clean:
	rm -rf $(VENV) $(LATEST) work_dirs
