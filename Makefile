# The two commands a new user types: `make demo` and `make test`. Both set everything up first.
VENV ?= .venv
PY := $(VENV)/bin/python
# Debian packages the tests and benchmarks compare against or need: hwloc (lstopo), likwid
# (likwid-pin), scotch (gmap), LEMON (exact matching, built into the kernels), gcc/g++ with
# OpenMP for the test programs, chromium (renders the HTML report in a test), Open MPI (the engine
# of pinwise mpi: its launcher, and the headers the PMPI recorder is built against), Slurm and
# munge (a one-node Slurm that a test starts in a folder of its own), Capstone (the sampling tracer's x86
# decoder, built into pinwise-sample); real programs users pin (OpenBLAS linked into a C program, pigz
# through a shell, stress-ng under the tracer).
APT_PACKAGES := hwloc likwid scotch liblemon-dev chromium valgrind gcc g++ make numactl libomp-dev libcapstone-dev \
	openmpi-bin libopenmpi-dev mpich libmpich-dev slurm-wlm munge libopenblas-dev pigz stress-ng
SOURCES := $(shell find src native -type f -not -name '*.pyc') pyproject.toml CMakeLists.txt

.PHONY: demo test test-unit deps install clean screenshot

demo: install
	$(VENV)/bin/pinwise demo --out pinwise-demo

test: install
	$(PY) -m pytest -q tests

# The unit tier alone (no Valgrind, MPI, Slurm, sampler or real timing): under 2 minutes.
test-unit: install
	$(PY) -m pytest -q -m unit tests

install: deps $(VENV)/.installed

# Every step says what it does before it starts: pip's own lines show the build's progress.
$(VENV)/.installed: $(SOURCES)
	@test -x $(PY) || { echo "pinwise: creating the virtual environment $(VENV) ..."; python3 -m venv $(VENV); }
	@echo "pinwise: installing pinwise and its Python dependencies into $(VENV) (the native part compiles: about a minute the first time) ..."
	$(PY) -m pip install --disable-pip-version-check --progress-bar on ".[test]"
	@touch $@
	@echo "pinwise: installed; the commands are in $(VENV)/bin (source $(VENV)/bin/activate puts them on PATH)"

# Installs missing Debian packages when running as root; otherwise says what to install.
deps:
	@missing=""; \
	for pkg in $(APT_PACKAGES); do dpkg -s $$pkg >/dev/null 2>&1 || missing="$$missing $$pkg"; done; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ]; then \
			echo "pinwise: installing Debian packages:$$missing (apt-get update, then install; a few minutes the first time) ..."; \
			apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; \
		else \
			echo "missing Debian packages:$$missing (run: sudo apt-get install$$missing); tests that need them are skipped"; \
		fi; \
	fi

# The README's picture of the HTML report: make demo's report, as headless Chromium renders it.
screenshot: demo
	mkdir -p docs
	chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1600,3000 \
		--screenshot=docs/report.png file://$(CURDIR)/pinwise-demo/report.html 2>/dev/null

clean:
	rm -rf $(VENV) build
