# Thin wrapper: bootstrap .venv, then call the pipeline (rankcollapse_book) or ruff and pytest.
PYTHON ?= python3.11
PROFILE ?= ci
DEVICE ?= auto
SEED ?= 0
VENV := .venv
# MathJax from the npm registry, served from the book's own files (the book renders offline).
MATHJAX_VERSION := 3.2.2
MATHJAX := book/_static/mathjax/tex-mml-chtml.js

.PHONY: book test test-all mutation clean

book: $(VENV)/.installed $(MATHJAX)
	$(VENV)/bin/python -m rankcollapse_book all --profile $(PROFILE) --device $(DEVICE) --seed $(SEED)

test: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/python -m pytest

test-all: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/python -m pytest -m ""

# Mutation testing of the verdict layer (configured in pyproject.toml; tens of minutes on
# two cores, so not part of `make test`): the score and the survivors at the end.
mutation: $(VENV)/.installed
	rm -rf mutants
	$(VENV)/bin/mutmut run --max-children 2
	$(VENV)/bin/mutmut export-cicd-stats && cat mutants/mutmut-cicd-stats.json
	$(VENV)/bin/mutmut results

# Reinstalls whenever the pins in pyproject.toml change.
$(VENV)/.installed: pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -e '.[book,dev]'
	touch $@

$(MATHJAX):
	mkdir -p .cache/npm book/_static/mathjax
	cd .cache/npm && npm pack --silent mathjax@$(MATHJAX_VERSION)
	tar xzf .cache/npm/mathjax-$(MATHJAX_VERSION).tgz -C book/_static/mathjax \
		--strip-components=2 package/es5
	test -f $@

clean:
	rm -rf _build book/chapters .cache mutants
