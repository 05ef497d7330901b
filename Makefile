# spherelab: the two commands of the README, plus benchmarks.
#   make lab                          install, then open JupyterLab on notebooks/
#   make lab HEADLESS=1 PORT=8899     same, no browser, listening on 127.0.0.1:8899
#   make test                         install, then run every test (notebooks in smoke size; one worker per core)
#   make test-fast                    the same without the tests marked slow (end-to-end fits, notebooks)
#   make test-equality                the equality tests under another thread count and chunk size (CI runs it)
#   make test-notebooks-full          every notebook at full size with its checks (not in CI: minutes each)
#   make test-browser                 every notebook in Chromium through JupyterLab, then the docs site
#   make lint                         ruff check (configured in pyproject.toml)
#   make docs                         the documentation site into docs/_build/html (notebooks executed, smoke size)
#   make wheel-test                   build a wheel, install it in a fresh venv, fit a tiny model outside the repository
#   make check-device-shape           benchmarks/gpu_check.py --sim --tiny --verify in a venv shaped like the lent GPU machine
#   make bench                        install the peer libraries, run the benchmarks
#   make bench-peers                  GPflow / GPyTorch comparisons (separate venv)

PYTHON   ?= python3
VENV     ?= .venv
PORT     ?= 8888
NOTEBOOK_DIR ?= notebooks
HEADLESS ?=
PYTEST_ARGS ?=

BIN   := $(VENV)/bin
STAMP := $(VENV)/.spherelab-installed
LAB_STAMP := $(VENV)/.spherelab-lab-installed
BENCH_STAMP := $(VENV)/.spherelab-bench-installed
CONSTRAINTS := .ci/constraints.txt
comma := ,

.PHONY: lab test test-equality test-notebooks-full test-fast test-browser lint bench bench-peers install clean check-device-shape docs wheel-test

install: $(STAMP)

$(BIN)/python:
	bash .ci/make_venv.sh "$(PYTHON)" "$(VENV)"

# the lab needs no CUDA package: numba-cuda (the simulator the tests use) comes with the test extra.
# First spherelab with its own dependencies only (NumPy, SciPy, Numba: seconds), so that Numba's
# warm-up (compiling every kernel: about 40 s of one core) runs beside the install of the extras
# (unpacking, mostly one core); it imports spherelab from lab/, untouched by pip's reinstalling
# the editable package, whose pinned dependencies pip leaves as they are.
# pip installs without byte-compiling (one core); the bytecode is compiled afterwards on every core
# (the processes a test run starts then read it, even where PYTHONDONTWRITEBYTECODE is set)
CORE_STAMP := $(VENV)/.spherelab-core
WARM_STAMP := $(VENV)/.spherelab-warm
COMPILE := $(BIN)/python -m compileall -q -j 0 "$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" >/dev/null
$(CORE_STAMP): pyproject.toml $(CONSTRAINTS) | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --no-compile -c $(CONSTRAINTS) -e .
	touch $@

# the compiled kernels' warm-up: Numba's cache written once, before the first fit
WARMUP := PYTHONPATH=lab $(BIN)/python -c "import spherelab; spherelab.warmup()"
# install_extras EXTRAS: pip installs them while the warm-up (once per venv) runs beside it; then
# JupyterLab's defaults for this lab (no news or update toast on a first start: an admin override)
# and the bytecode
define install_extras
	@if [ -f $(WARM_STAMP) ]; then w=; else $(WARMUP) & w=$$!; fi; \
	$(BIN)/python -m pip install --quiet --no-compile -c $(CONSTRAINTS) -e ".[$(1)]" || { [ -z "$$w" ] || kill $$w; exit 1; }; \
	if [ -n "$$w" ]; then wait $$w && touch $(WARM_STAMP); fi
	mkdir -p $(VENV)/share/jupyter/lab/settings && cp .jupyter/overrides.json $(VENV)/share/jupyter/lab/settings/
	$(COMPILE)
endef

$(LAB_STAMP): $(CORE_STAMP)
	$(call install_extras,lab)
	touch $@

$(STAMP): $(CORE_STAMP)
	$(call install_extras,lab$(comma)test$(comma)docs)
	touch $(LAB_STAMP) $@

# JupyterLab refuses to start as root unless told (containers, CI machines run as root)
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root,)

# .jupyter/jupyter_server_config.py: every save writes the notebook without outputs (git stays clean)
lab: $(LAB_STAMP)
	JUPYTER_CONFIG_PATH="$(CURDIR)/.jupyter$${JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH}" $(BIN)/jupyter lab --notebook-dir=$(NOTEBOOK_DIR) $(ALLOW_ROOT) \
	  $(if $(HEADLESS),--no-browser --ip=127.0.0.1 --ServerApp.open_browser=False,) --port=$(PORT)

# the tests spread over the cores (pytest-xdist: one worker per core, four at most; each worker's
# fits still follow the thread policy), twice as fast on two cores as one process; a worker that
# runs out of tests takes some of the other's (worksteal), so none idles through a long tail
TEST_WORKERS ?= -n auto --maxprocesses=4 --dist worksteal
test: $(STAMP)
	SPHERELAB_SMOKE=1 MPLBACKEND=Agg $(BIN)/python -m pytest $(TEST_WORKERS) $(PYTEST_ARGS)

# Every notebook in Debian's Chromium through JupyterLab (benchmarks/tools/browser.py --check): run all
# cells, no error output, every control redraws its figure; latencies are printed, not asserted.
# Then the documentation site, when built (make docs; CI builds it first), in the same browser:
# docs/check_in_browser.py.
# Installs chromium with apt-get when it can (root), else skips with the reason. The notebooks run at
# a reader's sizes; BROWSER_ARGS=--smoke runs them at the test suite's (CI: minutes, not ten).
# BROWSER_PARTS: notebooks, docs or both (CI runs the notebooks beside the docs build, the site after it).
BROWSER_PARTS ?= notebooks docs
test-browser: $(STAMP)
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && \
	  (apt-get update -qq && apt-get install -y -qq chromium) >/dev/null 2>&1; } || true
	@if ! command -v chromium >/dev/null 2>&1; then \
	  echo "test-browser: SKIPPED: Debian's chromium is not installed and could not be (apt-get install chromium, as root)"; \
	else \
	  $(BIN)/python -m pip install --quiet -c $(CONSTRAINTS) playwright && \
	  if echo "$(BROWSER_PARTS)" | grep -qw notebooks; then \
	    $(BIN)/python benchmarks/tools/browser.py --check --presses 1 $(BROWSER_ARGS) --chromium "$$(command -v chromium)" \
	    || exit 1; fi && \
	  if ! echo "$(BROWSER_PARTS)" | grep -qw docs; then :; \
	  elif [ -f docs/_build/html/index.html ]; then \
	    $(BIN)/python docs/check_in_browser.py --chromium "$$(command -v chromium)"; \
	  else echo "test-browser: the documentation site is not built (make docs): not checked"; fi; \
	fi

# the notebooks at full size (minutes each): every assertion beside a stated result, as a reader runs it
test-notebooks-full: $(STAMP)
	SPHERELAB_NOTEBOOKS=full MPLBACKEND=Agg $(BIN)/python -m pytest tests/test_notebooks.py $(PYTEST_ARGS)

# The equality tests (marked equality: two orders of the same sums, compared) again under other
# thread counts and chunk sizes than make test's (one thread, chunks sized from the cache), so that
# a tolerance fitted to one machine's chunking fails here first; the slow ones (a local cluster, the
# device check end to end) run in make test only. EQUALITY_RUNS: THREADS:ROWS pairs.
# Only the files that mark equality tests are collected (collecting the whole suite to deselect
# it costs each worker about 20 s).
EQUALITY_RUNS ?= 2:512
EQUALITY_FILES = $(shell grep -rl --include='*.py' 'mark.equality' tests)
test-equality: $(STAMP)
	@for run in $(EQUALITY_RUNS); do \
	  threads=$${run%%:*}; rows=$${run##*:}; \
	  echo "equality tests with SPHERELAB_THREADS=$$threads SPHERELAB_CHUNK_ROWS=$$rows"; \
	  SPHERELAB_THREADS=$$threads SPHERELAB_CHUNK_ROWS=$$rows SPHERELAB_SMOKE=1 MPLBACKEND=Agg \
	    $(BIN)/python -m pytest $(TEST_WORKERS) -m "equality and not slow" $(PYTEST_ARGS) $(EQUALITY_FILES) || exit 1; \
	done

test-fast: $(STAMP)
	SPHERELAB_SMOKE=1 MPLBACKEND=Agg $(BIN)/python -m pytest $(TEST_WORKERS) -m "not slow" $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check lab tests benchmarks notebooks docs .ci .jupyter

# The device check in numba-cuda's simulator, in a venv holding only what the lent GPU machine
# is known to have of spherelab's needs (no TBB, Dask, zarr, JupyterLab, ipywidgets), spherelab
# imported from lab/ as it is there: the one command a lent session runs cannot rot between loans.
DEVICE_VENV := .venv-device
$(DEVICE_VENV)/.installed: $(CONSTRAINTS)
	bash .ci/make_venv.sh "$(PYTHON)" "$(DEVICE_VENV)"
	$(DEVICE_VENV)/bin/python -m pip install --quiet --no-compile -c $(CONSTRAINTS) numpy scipy numba numba-cuda tqdm threadpoolctl
	touch $@

check-device-shape: $(DEVICE_VENV)/.installed
	PYTHONPATH=lab $(DEVICE_VENV)/bin/python benchmarks/gpu_check.py --sim --tiny --verify --out $(DEVICE_VENV)/gpu-check

$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -c $(CONSTRAINTS) -e ".[lab,test,bench]"
	touch $@

bench: $(BENCH_STAMP)
	$(BIN)/python benchmarks/speed/harmonics.py
	$(BIN)/python benchmarks/paper/accuracy.py
	$(BIN)/python benchmarks/speed/spectra.py
	$(BIN)/python benchmarks/speed/notebook_redraw.py
	$(BIN)/python benchmarks/paper/vish_uci.py
	$(BIN)/python benchmarks/speed/vish_scale.py
	$(BIN)/python benchmarks/paper/decoupled_snelson.py
	$(BIN)/python benchmarks/paper/hvgp_symmetry.py
	$(BIN)/python benchmarks/speed/threads.py

# GPflow / TensorFlow and GPyTorch / PyTorch (CPU build) live in their own environment: they
# pin NumPy < 2 and are not dependencies of spherelab
PEERS := .venv-bench
$(PEERS)/.installed:
	$(PYTHON) -m venv $(PEERS)
	$(PEERS)/bin/python -m pip install --quiet torch==2.13.0
	$(PEERS)/bin/python -m pip install --quiet gpytorch gpflow tensorflow-cpu tf-keras "tensorflow-probability[tf]" numba scipy tqdm psutil
	$(PEERS)/bin/python -m pip install --quiet --no-deps -e .
	touch $@

bench-peers: $(PEERS)/.installed
	$(PEERS)/bin/python benchmarks/speed/vish_peers.py
	$(PEERS)/bin/python benchmarks/speed/decoupled_throughput.py
	$(PEERS)/bin/python benchmarks/speed/frontier.py --splits 0 --budget 120

# Sphinx (autodoc + napoleon for the API, MyST-NB for the notebooks, executed at smoke size),
# warnings as errors; then every internal link of the built site must resolve (tests/docs_links.py)
docs: $(STAMP)
	rm -rf docs/_build
	@mkdir -p docs/_build; status=0; \
	SPHERELAB_SMOKE=1 MPLBACKEND=module://matplotlib_inline.backend_inline \
	  $(BIN)/sphinx-build -W --keep-going -q -b html docs docs/_build/html > docs/_build/sphinx.log 2>&1 || status=$$?; \
	grep -v "IPKernelApp\|^$$\|INFO traitlets" docs/_build/sphinx.log || true; \
	if [ $$status -ne 0 ]; then echo "make docs: sphinx-build failed ($$status)"; exit $$status; fi
	$(BIN)/python docs/check_links.py docs/_build/html

# The wheel as a user gets it: built by pip (its isolated build) from a copy of the tree's files
# (tracked and new, not ignored: nothing a build or an install left here), installed into a fresh
# venv (no -e, no repository on the path), then a tiny fit run from a temporary directory. It needs
# nothing of .venv.
WHEEL_VENV := .venv-wheel
wheel-test:
	rm -rf dist $(WHEEL_VENV)
	bash .ci/make_venv.sh "$(PYTHON)" "$(WHEEL_VENV)"
	src="$$(mktemp -d)" && git ls-files -co --exclude-standard | tar --ignore-failed-read -cf - -T - | tar -xf - -C "$$src" && \
	  $(WHEEL_VENV)/bin/python -m pip wheel --quiet --no-deps --wheel-dir "$(CURDIR)/dist" "$$src" && rm -rf "$$src"
	$(WHEEL_VENV)/bin/python -m pip install --quiet --no-compile -c $(CONSTRAINTS) dist/spherelab-*.whl
	cd "$$(mktemp -d)" && $(CURDIR)/$(WHEEL_VENV)/bin/python $(CURDIR)/.ci/wheel_smoke.py

clean:
	rm -rf $(VENV) $(DEVICE_VENV) $(WHEEL_VENV) build dist lab/*.egg-info .pytest_cache docs/_build
