# Two commands do all set-up on a fresh clone (see README.md and CONTRIBUTING.md):
#   make demo   – every runbook and the utilization report on the demo fleet -> reports/out/index.html (Python only)
#   make test   – ruff check, then the whole test suite, including a real Prometheus and a headless-Chromium check
PYTHON ?= python3
PYTEST_WORKERS ?= auto

.PHONY: setup setup-run system-deps demo test

system-deps:
	@bash .ci/system-deps

setup: system-deps
	$(PYTHON) -m pip install -q --disable-pip-version-check -e ".[all,test]"

# the demo needs Python only: no Debian package, no root, no test extras
setup-run:
	$(PYTHON) -m pip install -q --disable-pip-version-check -e ".[all]"

demo: setup-run
	gpuops demo --out reports/out

test: setup
	$(PYTHON) -m ruff check .
	GPUOPS_REQUIRE_PROMETHEUS=1 GPUOPS_REQUIRE_BROWSER=1 $(PYTHON) -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder -p no:cacheprovider -p no:benchmark --durations=15
