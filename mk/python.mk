# mk/python.mk — the Python package h5log (python/h5log; docs/python.md),
# included by the Makefile. The package is pure Python over libh5log.so
# (ctypes); it needs Debian's python3-numpy and python3-mpi4py under
# /usr/bin/python3 ($(PY)).
#
#   make check-python   its tests (tests/e2e/test_python.py; make check runs them too)
#
# `make install` (mk/install.mk) copies it to $(PYTHONDIR) and writes the
# installed library's path into h5log/_config.py. The default,
# $(PREFIX)/lib/pythonX.Y/dist-packages, is on /usr/bin/python3's sys.path
# for PREFIX=/usr/local and /usr (Debian); for another PREFIX set
# PYTHONPATH=$(PYTHONDIR), or pass PYTHONDIR=.

PY_VERSION := $(shell $(PY) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
PYTHONDIR ?= $(PREFIX)/lib/python$(PY_VERSION)/dist-packages
PY_MODULES := $(wildcard python/h5log/*.py)

.PHONY: check-python
check-python: lib tools
	H5LOG_BUILD=$(abspath $(BUILD)) $(PY) -m pytest -q -p no:cacheprovider tests/e2e/test_python.py
