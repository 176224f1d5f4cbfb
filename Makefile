# The two commands of the README:
#   make book   set up .venv, run the study (default profile: cpu, pair en-de), check that the book
#               is one consistent whole (headlib.book check), build it; it first prints an estimate
#               of the time from the measured costs. Pages whose inputs did not change are skipped.
#   make book FORCE=1   re-execute every page (and train what artifacts/ lacks)
#   make test   set up .venv, run the tests (smoke profile, including the smoke book in a browser)
VENV    := .venv
PY      := $(VENV)/bin/python
PROFILE ?= cpu
PAIRS   ?= en-de
SEEDS   ?= 1
FORCE   ?=
# The cpu profile's book is book/ (its executed notebooks are committed); any other profile builds
# into artifacts/book-<profile>/ so that it never overwrites them.
BOOK    ?= $(if $(filter cpu,$(PROFILE)),book,artifacts/book-$(PROFILE))

.PHONY: book study test clean-book chromium

$(VENV)/.installed: requirements.txt pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -e .
	touch $@

study: $(VENV)/.installed
	$(PY) -m headlib.book run --profile $(PROFILE) --pairs $(PAIRS) --seeds $(SEEDS) --out $(BOOK) $(if $(FORCE),--force)

book: study
	$(PY) -m headlib.book check --profile $(PROFILE) --out $(BOOK)
	$(VENV)/bin/jupyter-book build $(BOOK) -W -n --keep-going

# The browser tests' headless Chromium: Debian's package (never `playwright install`), installed
# here when it is missing and make runs as root, else named in one line.
chromium:
	@command -v chromium >/dev/null || if [ "$$(id -u)" = 0 ]; then \
	  DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	else echo "make test needs Debian's chromium for its browser tests: sudo apt-get install -y chromium" >&2; exit 1; fi

test: $(VENV)/.installed chromium
	$(PY) -m pytest -q tests

clean-book:   # Jupyter Book builds beside the _config.yml it finds: the root's for book/
	rm -rf $(if $(filter cpu,$(PROFILE)),_build,$(BOOK)/_build)
