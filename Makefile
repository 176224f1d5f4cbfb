# The two commands of the README:
#   make book   set up .venv, run the study (default profile: cpu, pair en-de), build the book
#   make test   set up .venv, run the tests (smoke profile, including the smoke book in a browser)
VENV    := .venv
PY      := $(VENV)/bin/python
PROFILE ?= cpu
PAIRS   ?= en-de
SEEDS   ?= 1

.PHONY: book study test clean-book

$(VENV)/.installed: requirements.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	touch $@

study: $(VENV)/.installed
	$(PY) -m headlib.book run --profile $(PROFILE) --pairs $(PAIRS) --seeds $(SEEDS)

book: study
	$(VENV)/bin/jupyter-book build book/ -W -n --keep-going

test: $(VENV)/.installed
	$(PY) -m pytest -q tests

clean-book:
	rm -rf book/_build
