# The two commands a new user types: `make demo` and `make test`. Both set everything up first.
VENV ?= .venv
PY := $(VENV)/bin/python
# Debian packages the tests and benchmarks compare against or need: hwloc (lstopo), likwid
# (likwid-pin), scotch (gmap), LEMON (exact matching, built into the kernels), gcc/g++ with
# OpenMP for the test programs, chromium (renders the HTML report in a test).
APT_PACKAGES := hwloc likwid scotch liblemon-dev chromium valgrind gcc g++ make numactl libomp-dev
SOURCES := $(shell find src native -type f -not -name '*.pyc') pyproject.toml CMakeLists.txt

.PHONY: demo test deps install clean

demo: install
	$(VENV)/bin/pinwise demo --out pinwise-demo

test: install
	$(PY) -m pytest -q tests

install: deps $(VENV)/.installed

$(VENV)/.installed: $(SOURCES)
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check ".[test]"
	touch $@

# Installs missing Debian packages when running as root; otherwise says what to install.
deps:
	@missing=""; \
	for pkg in $(APT_PACKAGES); do dpkg -s $$pkg >/dev/null 2>&1 || missing="$$missing $$pkg"; done; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ]; then \
			echo "installing Debian packages:$$missing"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
		else \
			echo "missing Debian packages:$$missing (run: sudo apt-get install$$missing); tests that need them are skipped"; \
		fi; \
	fi

clean:
	rm -rf $(VENV) build
