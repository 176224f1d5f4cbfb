# The README's commands, three rungs:
#   make book    set up .venv, check that the committed book is one consistent whole (python -m headlib.book
#                check), build it from the committed executed pages: no execution, no training
#   make pages   re-execute every committed page from the released models and committed records into a
#                scratch folder and compare every glued value with the committed page (python -m headlib.book verify)
#   make study   retrain and recompute from nothing, unit by unit (UNITS=pair/seed ...): train, release, pages
#   make test    set up .venv, run the tests (smoke profile, including the smoke book in a browser, and the check
#                of the committed book)
VENV    := .venv
PY      := $(VENV)/bin/python
PROFILE ?= cpu
UNITS   ?= en-de/1
PAGES   ?= 03_data_and_models,04_important_heads,05_head_functions,09_claims
# The cpu profile's book is book/ (its executed notebooks are committed); any other profile builds
# into artifacts/book-<profile>/ so that it never overwrites them.
BOOK    ?= $(if $(filter cpu,$(PROFILE)),book,artifacts/book-$(PROFILE))

.PHONY: book pages study test clean-book chromium

$(VENV)/.installed: requirements.txt pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -e .
	touch $@

book: $(VENV)/.installed
	$(PY) -m headlib.book check --profile $(PROFILE) --out $(BOOK)
	$(VENV)/bin/jupyter-book build $(BOOK) -W -n --keep-going

pages: $(VENV)/.installed
	$(PY) -m headlib.book verify --profile $(PROFILE) --out $(BOOK)

# Each unit: train from nothing (HEADLIB_RELEASES=0: no release is read), release the model over the
# committed one, then execute its pages from the new release. Commit models/, results/ and book/ after each.
study: $(VENV)/.installed
	@for unit in $(UNITS); do pair=$${unit%/*}; seed=$${unit#*/}; \
	  HEADLIB_RELEASES=0 $(PY) -m headlib train --profile $(PROFILE) --pair $$pair --seed $$seed && \
	  $(PY) -m headlib release --profile $(PROFILE) --pair $$pair --seed $$seed && \
	  $(PY) -m headlib.book run --profile $(PROFILE) --pairs $$pair --seeds $$seed --out $(BOOK) \
	    --notebooks $(PAGES) --force || exit 1; \
	done
	$(PY) -m headlib.book check --profile $(PROFILE) --out $(BOOK)

# The browser tests' headless Chromium: Debian's package (never `playwright install`), installed
# here when it is missing and make runs as root, else named in one line.
chromium:
	@command -v chromium >/dev/null || if [ "$$(id -u)" = 0 ]; then \
	  DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	else echo "make test needs Debian's chromium for its browser tests: sudo apt-get install -y chromium" >&2; exit 1; fi

test: $(VENV)/.installed chromium
	$(PY) -m pytest -q tests
	$(PY) -m headlib.book check

clean-book:   # Jupyter Book builds beside the _config.yml it finds: the root's for book/
	rm -rf $(if $(filter cpu,$(PROFILE)),_build,$(BOOK)/_build)
