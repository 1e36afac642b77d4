# Thin wrapper: bootstrap .venv, then call the pipeline (rankcollapse.book) or pytest.
PYTHON ?= python3.11
PROFILE ?= ci
DEVICE ?= auto
SEED ?= 0
VENV := .venv

.PHONY: book test test-all clean

book: $(VENV)/.installed
	$(VENV)/bin/python -m rankcollapse.book all --profile $(PROFILE) --device $(DEVICE) --seed $(SEED)

test: $(VENV)/.installed
	$(VENV)/bin/python -m pytest

test-all: $(VENV)/.installed
	$(VENV)/bin/python -m pytest -m ""

# Reinstalls whenever the pins in pyproject.toml change.
$(VENV)/.installed: pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -e '.[book,dev]'
	touch $@

clean:
	rm -rf _build book/chapters .cache
