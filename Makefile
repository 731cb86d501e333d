# neuroflow: the two commands are `make demo` and `make test` (`make test-fast` for the
# package tests alone, without the Snakemake runs and the slow tests).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
CORES  ?= all
# PyTorch first, so that the range in pyproject.toml accepts it as is. On a machine
# without a GPU whose default index would pull the multi-GB CUDA build, take PyTorch's
# CPU wheel index: `make demo TORCH_INDEX=https://download.pytorch.org/whl/cpu`.
TORCH_SPEC  ?= torch==2.13.0
TORCH_INDEX ?=
# Optional parts installed with the package (pyproject.toml's optional-dependencies).
EXTRAS      ?= test,demo,video,slurm,riemann,eegclean,audio-weights,docs
# Test processes side by side (a test module stays in one): one per core, at most 4, as
# every workflow test runs jobs two at a time. `make test TEST_WORKERS=0` runs them in one.
# The tiny demo run that many workflow modules read is built once and shared by all of
# them (tests/workflow/conftest.py); pytest lists the 25 slowest tests and fixtures.
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); echo $$(( n < 4 ? n : 4 )))
# Overlays on the demo's config, e.g. `make demo DEMO_CONFIG=config/presets/transformer.yaml`.
DEMO_CONFIG ?=

# The package and its dependencies install with uv where it installs (about 3x faster
# than pip: parallel downloads, unpacking and byte-compiling); `make install
# INSTALLER=pip` takes pip alone, e.g. where pip's own configuration names a private
# index that uv does not read. Should uv fail, pip installs the same set.
INSTALLER   ?= uv

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	@if [ "$(INSTALLER)" = uv ]; then $(BIN)/pip install --quiet uv || true; fi

$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet --no-compile $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) "$(TORCH_SPEC)"
	@# PyTorch's modules compile (all cores) while the rest installs
	@site=$$($(BIN)/python -c "import sysconfig; print(sysconfig.get_path('purelib'))"); \
	$(BIN)/python -m compileall -q -j 0 "$$site/torch" >/dev/null & compiling=$$!; \
	if [ "$(INSTALLER)" = uv ] && [ -x $(BIN)/uv ] && \
		$(BIN)/uv pip install --python $(BIN)/python --quiet --compile-bytecode -e ".[$(EXTRAS)]"; \
	then :; else \
		echo "installing with pip"; $(BIN)/pip install --quiet -e ".[$(EXTRAS)]"; \
	fi; \
	wait $$compiling || true  # a file that does not compile is left to the interpreter
	@# pymoten declares the GUI build of OpenCV (it needs libGL); keep the headless one only.
	@if $(BIN)/pip show --quiet opencv-python >/dev/null 2>&1; then \
		$(BIN)/pip uninstall --quiet --yes opencv-python && \
		$(BIN)/pip install --quiet --force-reinstall --no-deps opencv-python-headless; \
	fi
	touch $@

install: $(VENV)/.installed

demo: install
	$(BIN)/snakemake --workflow-profile workflow/profiles/local --cores $(CORES) $(if $(DEMO_CONFIG),--configfile $(DEMO_CONFIG))
	$(BIN)/snakemake --report results/report.html $(if $(DEMO_CONFIG),--configfile $(DEMO_CONFIG))
	@echo "Demo finished: artifacts under results/, report at results/report.html"

.PHONY: test test-fast
test: install
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile

# The inner loop: every test but the workflow runs end to end (marked `workflow`) and the
# tests of many seeds or long fits (marked `slow`); `make test` runs them all.
test-fast: install
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile -m "not workflow and not slow"

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/snakemake --lint

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# Every benchmark at a quick size; `make bench SIZE=` runs the full sizes quoted in docs/performance.md.
SIZE ?= --small
bench: install
	@for script in bench/bench_*.py; do \
		echo "== $$script"; $(BIN)/python $$script $(SIZE) || exit 1; \
	done

# The documentation site into site/ (offline; --strict: warnings and broken links fail).
.PHONY: docs
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

clean-results:
	rm -rf results .snakemake

# SLURM profile on a throw-away one-node cluster (root + apt-get; a few minutes).
.PHONY: test-slurm
test-slurm: install
	NEUROFLOW_SLURM_TEST=1 timeout -s INT -k 60 1800 $(BIN)/python -m pytest tests/workflow/test_slurm.py -v -p no:cacheprovider

# The report of a tiny run in headless Chromium, a screenshot per category (Debian's chromium).
REPORT_SCREENSHOTS ?= results/report-screenshots
.PHONY: test-report
test-report: install
	@if [ ! -x /usr/bin/chromium ] && ! command -v chromium >/dev/null; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			apt-get install -y chromium || { apt-get update && apt-get install -y chromium; } || exit 1; \
		else \
			echo "test-report needs Chromium: run 'sudo apt-get install -y chromium' (Debian/Ubuntu)"; exit 1; \
		fi; \
	fi
	$(BIN)/pip install --quiet -e ".[report-test]"
	NEUROFLOW_REPORT_TEST=1 NEUROFLOW_REPORT_SCREENSHOTS="$(REPORT_SCREENSHOTS)" \
		timeout -s INT -k 60 1800 $(BIN)/python -m pytest tests/workflow/test_report_browser.py -v -p no:cacheprovider; \
		status=$$?; echo "Report screenshots in $(REPORT_SCREENSHOTS)/"; exit $$status
