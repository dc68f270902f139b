# Two commands do all set-up on a fresh clone (see README.md and CONTRIBUTING.md):
#   make demo   – every runbook and the utilization report on the demo fleet -> reports/out/index.html (Python only)
#   make test   – ruff check, then the whole test suite, including a real Prometheus and a headless-Chromium check
PYTHON ?= python3
# one more worker than CPUs: while one worker waits (a server's timeout, Prometheus, a kernel starting), the others
# keep every CPU busy (-n auto, one per CPU, left the 2-core box ~20 % idle: 1,280 CPU-s in 794 s)
PYTEST_WORKERS ?= $(shell $(PYTHON) -c "import os; print(len(os.sched_getaffinity(0)) + 1)")

.PHONY: setup setup-run system-deps demo test

system-deps:
	@bash .ci/system-deps

# an editable install compiles nothing, and where PYTHONDONTWRITEBYTECODE is set no
# process writes its bytecode either: every kernel, `gpuops` process and test worker compiled gpulib's ~250 modules
# from source again (~0.2 s of CPU each, ~150 processes in `make test`). compileall writes them once (0.5 s).
COMPILE = $(PYTHON) -m compileall -q -j 0 gpulib

setup: system-deps
	$(PYTHON) -m pip install -q --disable-pip-version-check -e ".[all,test]"
	$(COMPILE)

# the demo needs Python only: no Debian package, no root, no test extras
setup-run:
	$(PYTHON) -m pip install -q --disable-pip-version-check -e ".[all]"
	$(COMPILE)

demo: setup-run
	gpuops demo --out reports/out

# pytest runs with PYTHONDONTWRITEBYTECODE emptied (Python reads an empty value as unset): the three workers collect
# the same ~400 test files, and one that reaches a file after another has rewritten its asserts reads pytest's cache
# instead of rewriting it again (36.7 -> 31.9 CPU-s for the workers' collection on the 2-core box)
test: setup
	$(PYTHON) -m ruff check .
	PYTHONDONTWRITEBYTECODE= GPUOPS_REQUIRE_PROMETHEUS=1 GPUOPS_REQUIRE_BROWSER=1 $(PYTHON) -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder -p no:cacheprovider -p no:benchmark --durations=15
