# Two commands do all set-up on a fresh clone (see README):
#   make demo   – every runbook and the utilization report on the demo fleet -> reports/out/index.html
#   make test   – the whole test suite, including a real Prometheus and a headless-Chromium check
PYTHON ?= python3
PYTEST_WORKERS ?= auto

.PHONY: setup system-deps demo test

system-deps:
	@bash .ci/system-deps

setup: system-deps
	$(PYTHON) -m pip install -q --disable-pip-version-check -e ".[all,test]"

demo: setup
	gpuops demo --out reports/out

test: setup
	GPUOPS_REQUIRE_PROMETHEUS=1 GPUOPS_REQUIRE_BROWSER=1 $(PYTHON) -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder -p no:cacheprovider -p no:benchmark --durations=15
