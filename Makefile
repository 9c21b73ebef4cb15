# h5logfs — top-level Makefile. `make help` lists the targets.
#
# One build tree per flavour: build/ (default), build-asan/ (make asan),
# build-tsan/ (make tsan). libcore's reader side (libh5lcore.a) needs only
# libxxhash; libh5log adds the MPI writer and the HDF5 helpers.
#
# Packages: `make deps` installs them; `make check` and `make demo` install
# what is missing first and then build in a second make, because the
# pkg-config flags below are computed when a make reads this file — a make
# that started before the packages were there would compile and link without
# them. `make` (all) never runs apt-get: it stops with a message instead.

PREFIX ?= /usr/local
DESTDIR ?=
BUILD ?= build
SAN ?=
CC ?= gcc
# -Werror in `make check` (and so in CI) only: a newer compiler's new
# warning must not break a user's plain `make`
WERROR ?=
PY := /usr/bin/python3

HDF5_CFLAGS := $(shell pkg-config --cflags hdf5 2>/dev/null)
HDF5_LIBS := $(shell pkg-config --libs hdf5 2>/dev/null) -lhdf5_hl
FUSE_CFLAGS := $(shell pkg-config --cflags fuse3 2>/dev/null)
FUSE_LIBS := $(shell pkg-config --libs fuse3 2>/dev/null) $(shell pkg-config --libs libsystemd 2>/dev/null)
XXH_LIBS := $(shell pkg-config --libs libxxhash 2>/dev/null)
HDF5_HL_LIBDIR := $(shell pkg-config --variable=libdir hdf5 2>/dev/null)

CFLAGS ?= -O2 -g
# -MMD -MP: every object depends on exactly the headers it includes
override CFLAGS += -std=c11 -D_GNU_SOURCE -Wall -Wextra $(WERROR) -MMD -MP -fPIC -Ilibcore/include $(SAN)
override LDFLAGS += $(SAN)

# the library's version and soname, defined once (h5log_common.h)
H5L_VERSION := $(shell sed -n 's/^\#define H5L_VERSION_STRING "\(.*\)"/\1/p' libcore/include/h5log_common.h)
H5L_SOVERSION := $(firstword $(subst ., ,$(H5L_VERSION)))
H5L_SONAME := libh5log.so.$(H5L_SOVERSION)

# libcore's private headers: its own modules and unit tests only. The
# daemon, tools, benchmarks and demo see libcore/include alone (the check
# tests/check_boundary.sh in make check keeps it so).
LIBCORE_DIRS := base format read write hdf5
LIBCORE_PRIV := $(LIBCORE_DIRS:%=-Ilibcore/src/%)

# by folder (docs/libcore.md): base/ what every layer uses, format/ the
# bytes of docs/format.md, read/ the reader, write/ the writer and its
# close, hdf5/ what libcore builds with libhdf5
CORE_MODS := base/error base/codec base/fdio format/format format/journal format/schema base/box read/index read/ckchain read/ckmap write/ckbuild \
	read/drop read/xfer format/ckpt read/ckverify read/reader read/rlazy read/rdata write/wlock
WRITER_MODS := write/writer write/wopen write/wdefine write/wput write/wflush write/wclose
LIB_MODS := hdf5/h5type write/anchor $(WRITER_MODS) hdf5/canon hdf5/btree write/final write/fcopy write/findex write/recover
CORE_OBJS := $(CORE_MODS:%=$(BUILD)/libcore/%.o)
LIB_OBJS := $(LIB_MODS:%=$(BUILD)/libcore/%.o)

UNIT_TESTS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(wildcard tests/unit/test_*.c))
MPI_TESTS := $(patsubst tests/mpi/%.c,$(BUILD)/tests/%,$(wildcard tests/mpi/*.c))
TOOLS := $(BUILD)/bin/h5logreplay $(BUILD)/bin/h5logdump $(BUILD)/bin/h5logtail $(BUILD)/bin/h5logrecover
FUSED_MODS := memvfd skel cache tbuf badlog watch lfile inode ticks fs main
FUSED_OBJS := $(FUSED_MODS:%=$(BUILD)/fused/%.o)
DAEMON := $(BUILD)/bin/h5logfs
FUSED_TESTS := $(patsubst tests/fused/%.c,$(BUILD)/tests/%,$(wildcard tests/fused/test_*.c))
BENCH := $(BUILD)/bench/bench_write

DEB_PKGS := build-essential pkg-config libhdf5-openmpi-dev hdf5-tools libfuse3-dev fuse3 \
	libxxhash-dev openmpi-bin libopenmpi-dev python3-h5py python3-netcdf4 python3-xarray \
	python3-pytest python3-numpy netcdf-bin libsystemd-dev systemd man-db cdo nco python3-h5netcdf \
	clang libclang-rt-dev python3-mpi4py libpnetcdf-dev python3-h5py-mpi python3-matplotlib

.PHONY: all deps deps-check check demo asan tsan bench-write bench-read bench-memory bench-ticks bench-standalone bench-scale bench-longlog bench-seed bench-finalize bench-open bench-swmr clean help lib tools tests daemon soak fuzz fuzz-build

# Goals that compile need the packages now; say so instead of failing in a
# compiler with "xxhash.h: No such file".
BUILD_GOALS := $(filter-out deps deps-check check demo clean help uninstall,$(or $(MAKECMDGOALS),all))
ifneq ($(BUILD_GOALS),)
ifneq ($(shell pkg-config --exists hdf5 fuse3 libxxhash libsystemd && echo yes),yes)
$(error build dependencies missing (pkg-config finds no hdf5, fuse3, libxxhash or libsystemd): run `make deps`, or `make check` / `make demo`, which install them first)
endif
endif

all: lib tools daemon tests

help:
	@echo "make            build libcore (libh5log), tools and tests into $(BUILD)/ (needs the packages: make deps)"
	@echo "make deps       apt-get install every Debian package the build, tests and benchmarks need"
	@echo "make demo       an MPI job writes a file for a few seconds; mount it and read it while it grows"
	@echo "make check      build (with -Werror) and run every test suite; ends with 'N passed, N failed'"
	@echo "make asan       the same, built with AddressSanitizer and UBSan (in build-asan/)"
	@echo "make tsan       the threaded unit tests (cache, reader) under ThreadSanitizer"
	@echo "make soak SECONDS=N  the differential test (tests/e2e/difftest.py) on random scripts for N"
	@echo "                seconds (default 60); prints the seed of every failure and how to rerun it;"
	@echo "                LIVE=1 checks every snapshot a reader sees while each script is written"
	@echo "make fuzz       the libFuzzer harnesses (clang, ASan, UBSan; in build-fuzz/), FUZZ_SECONDS=60 each;"
	@echo "                prints runs, coverage and any crash file (make check runs each briefly)"
	@echo "make bench-write  writer benchmark (JSON): libh5log (finalizing at close; BENCH_FINALIZE=0: not) vs raw MPI-IO, native parallel HDF5 and PnetCDF (BENCH_FULL=1: 1 GiB)"
	@echo "make bench-read   read benchmark (JSON): mount vs canonical file, h5py and libhdf5 (BENCH_GIB=0.25 quick, BENCH_REPS=3 robust)"
	@echo "make bench-memory daemon RSS per million records (JSON)"
	@echo "make bench-ticks  the ticks tree: listing 100,000 ticks, an old tick's open+read vs the newest's (JSON)"
	@echo "make bench-standalone  finalizing at close (JSON): close time, file size, plain h5py vs the mount"
	@echo "make bench-scale  live files and skeletons at scale (JSON): newest tick's delay, daemon CPU and RSS, lookups during a build, libhdf5's own time for the 20,000 datasets (bench/h5floor)"
	@echo "make bench-longlog first open of 10^4..10^6-tick logs: reader time and memory per tick, from index checkpoints (as libraries and as the daemon open them) vs the whole journal vs a base commit, daemon lookup+read (JSON; BENCH_TICKS, BENCH_ROUNDS, BENCH_BASE, BENCH_CKPT, BENCH_DAEMON, BENCH_STEP_ATTR=1: an attribute set every tick)"
	@echo "make bench-open   h5l_open (a restart) of a long log of many variables (JSON): open time per round, the reader's share, the journal's bytes (BENCH_TICKS=100000, BENCH_VARS=1000, BENCH_NP=2, BENCH_ROUNDS=5, BENCH_DIR=/tmp)"
	@echo "make bench-finalize  finalizing's cost at h5l_close against the bytes (JSON): a float32 cube of 64 MiB..2 GiB"
	@echo "                written as bands by 2 ranks, every chunking of bench-seed (x256, x512); ratios for 4x the"
	@echo "                bytes against <= 4.4x the time (BENCH_SIZES, BENCH_CHUNKINGS, BENCH_ROUNDS=3, BENCH_NP=2)"
	@echo "make bench-swmr   the VFD SWMR RFC's live-view tests through the mount (JSON): 10,000 variables extended"
	@echo "                round-robin, ten n x 1000 x 1000 int32 planes; write->visible latency in ticks against 3,"
	@echo "                daemon CPU (and every CPU_EVERY=60 s) and RSS (PASSES=240 of the RFC's 10,000, PLANE_PASSES=30, VARS,"
	@echo "                RANKS=2, FLUSH=0.5);"
	@echo "                first open of 1,000 variables by h5py, netCDF4, xarray through a fresh daemon (FO_VARS, FO_ROUNDS)"
	@echo "make bench-seed   writers (h5log, h5py-mpio, h5py, netCDF4) and readers (mount vs local file; h5py,"
	@echo "                netCDF4, xarray; cold, warm) of setups of chunked variables: JSON records, summary, PNG"
	@echo "                plots in $(BUILD)/bench-seed/ (SETUP=quick|x256|x512|many ITERATIONS=3 RANKS=1,2)"
	@echo "                (a writer past WRITE_TIMEOUT=3600 seconds is recorded as not finishing, the run goes on)"
	@echo "make install    install daemon, helpers, tools, library, headers, h5log.pc, units, man pages,"
	@echo "                the Python package h5log (PYTHONDIR; docs/python.md)"
	@echo "                (PREFIX=/usr/local DESTDIR=); make uninstall removes them"
	@echo "make check-python  the Python package's tests (tests/e2e/test_python.py)"
	@echo "make clean      remove build trees"

# Install what is missing, once: a fresh Debian 12 machine needs only `make check`.
deps-check:
	@if ! pkg-config --exists hdf5 fuse3 libxxhash libsystemd || ! command -v mpirun >/dev/null || \
	   ! command -v h5dump >/dev/null || ! command -v ncdump >/dev/null || \
	   ! command -v cdo >/dev/null || ! command -v ncks >/dev/null || ! command -v clang >/dev/null || \
	   ! $(PY) -c 'import h5py, netCDF4, numpy, pytest, h5netcdf, xarray, mpi4py, matplotlib' 2>/dev/null; then \
		$(MAKE) --no-print-directory deps; fi

deps:
	apt-get update -q
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(DEB_PKGS)

lib: $(BUILD)/libh5lcore.a $(BUILD)/libh5log.a $(BUILD)/libh5log.so
tools: $(TOOLS)
daemon: $(DAEMON)
FAULT_SHIM := $(BUILD)/tests/fault_shim.so
tests: $(UNIT_TESTS) $(MPI_TESTS) $(FUSED_TESTS) $(BUILD)/tests/test_lfile_gather $(FAULT_SHIM)

# -fvisibility=hidden: libh5log.so exports the H5L_API functions and nothing
# of its insides (the daemon and tools link the static archive)
$(BUILD)/libcore/%.o: libcore/src/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LIBCORE_PRIV) -fvisibility=hidden $(HDF5_CFLAGS) -c $< -o $@

$(BUILD)/libh5lcore.a: $(CORE_OBJS)
	ar rcs $@ $^

$(BUILD)/libh5log.a: $(CORE_OBJS) $(LIB_OBJS)
	ar rcs $@ $^

# --no-undefined: a library linked without one of its dependencies fails
# here, instead of installing and failing in every program that loads it.
# The soname link lets programs linked with -Lbuild -lh5log start from the
# build tree (with -Wl,-rpath or LD_LIBRARY_PATH).
$(BUILD)/libh5log.so: $(CORE_OBJS) $(LIB_OBJS)
	$(CC) -shared $(LDFLAGS) -Wl,--no-undefined -Wl,-soname,$(H5L_SONAME) -o $@ $^ $(HDF5_LIBS) $(XXH_LIBS) -lpthread -lm
	ln -sfn libh5log.so $(BUILD)/$(H5L_SONAME)

LINK_LIB = $(BUILD)/libh5log.a $(HDF5_LIBS) $(XXH_LIBS) -lpthread -lm
# the MPI test programs link a library with the test hooks compiled in
# (H5L_TEST_HOOKS: e.g. a kill between a tick's writes and its commit);
# the installed library has none, not even a getenv on the flush path
$(BUILD)/libcore/write/%_hooks.o: libcore/src/write/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LIBCORE_PRIV) -DH5L_TEST_HOOKS -fvisibility=hidden $(HDF5_CFLAGS) -c $< -o $@
WRITER_OBJS := $(WRITER_MODS:%=$(BUILD)/libcore/%.o)
$(BUILD)/libh5log_test.a: $(CORE_OBJS) $(filter-out $(WRITER_OBJS),$(LIB_OBJS)) $(WRITER_MODS:%=$(BUILD)/libcore/%_hooks.o)
	ar rcs $@ $^
LINK_LIB_TEST = $(BUILD)/libh5log_test.a $(HDF5_LIBS) $(XXH_LIBS) -lpthread -lm
LINK_CORE = $(BUILD)/libh5lcore.a $(XXH_LIBS) -lpthread -lm

$(BUILD)/bin/%: tools/%.c $(BUILD)/libh5log.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(HDF5_CFLAGS) $< -o $@ $(LDFLAGS) $(LINK_LIB)

# unit tests link the reader core only: proof it needs neither MPI nor HDF5
$(BUILD)/tests/test_%: tests/unit/test_%.c tests/unit/tharness.h $(BUILD)/libh5lcore.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LIBCORE_PRIV) -Itests/unit $< -o $@ $(LDFLAGS) $(LINK_CORE)

# tests that fail allocations on demand (tests/unit/oom.h) link with this
OOM_WRAP := -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc
# the reader's test also fails allocations on demand
$(BUILD)/tests/test_reader: tests/unit/test_reader.c tests/unit/tharness.h tests/unit/oom.h $(BUILD)/libh5lcore.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LIBCORE_PRIV) -Itests/unit $< -o $@ $(LDFLAGS) $(OOM_WRAP) $(LINK_CORE)

# and the checkpoint test (a summary made or checked short of memory)
$(BUILD)/tests/test_ckpt: tests/unit/test_ckpt.c tests/unit/tharness.h tests/unit/oom.h $(BUILD)/libh5lcore.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LIBCORE_PRIV) -Itests/unit $< -o $@ $(LDFLAGS) $(OOM_WRAP) $(LINK_CORE)

# the fault test fails the library's allocations on demand too (its oom mode)
$(BUILD)/tests/test_faults: tests/mpi/test_faults.c tests/mpi/expect.h tests/unit/oom.h $(BUILD)/libh5log_test.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(HDF5_CFLAGS) -Itests/unit $< -o $@ $(LDFLAGS) $(OOM_WRAP) $(LINK_LIB_TEST)

$(BUILD)/tests/%: tests/mpi/%.c $(BUILD)/libh5log_test.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(HDF5_CFLAGS) -Itests/unit $< -o $@ $(LDFLAGS) $(LINK_LIB_TEST)

# LD_PRELOAD shim that makes chosen writes fail (tests/mpi/test_faults.c).
# Built without sanitizers: it is loaded before any runtime (under make asan
# the tests set ASAN_OPTIONS=verify_asan_link_order=0).
$(FAULT_SHIM): tests/fault/fault_shim.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -std=c11 -D_GNU_SOURCE -Wall -Wextra $(WERROR) -fPIC -shared $< -o $@ -ldl -lpthread

# the daemon: libcore's reader and canon modules, libhdf5, libfuse3
$(BUILD)/fused/%.o: fused/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Ifused $(HDF5_CFLAGS) $(FUSE_CFLAGS) -c $< -o $@

$(DAEMON): $(FUSED_OBJS) $(BUILD)/libh5log.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(FUSED_OBJS) $(LINK_LIB) $(FUSE_LIBS)

$(BUILD)/tests/test_memvfd: tests/fused/test_memvfd.c $(BUILD)/fused/memvfd.o fused/memvfd.h tests/unit/tharness.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Ifused -Itests/unit $(HDF5_CFLAGS) $< $(BUILD)/fused/memvfd.o -o $@ $(LDFLAGS) $(HDF5_LIBS) -lm

$(BUILD)/tests/test_cache: tests/fused/test_cache.c $(BUILD)/fused/cache.o fused/cache.h tests/unit/tharness.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Ifused -Itests/unit $< $(BUILD)/fused/cache.o -o $@ $(LDFLAGS) $(XXH_LIBS) -lpthread

$(BUILD)/tests/test_tbuf: tests/fused/test_tbuf.c $(BUILD)/fused/tbuf.o fused/tbuf.h tests/unit/tharness.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Ifused -Itests/unit $< $(BUILD)/fused/tbuf.o -o $@ $(LDFLAGS) -lpthread

# (btree.c encodes HDF5's chunk B-trees; the test checks them with libhdf5)
$(BUILD)/tests/test_btree: tests/unit/test_btree.c $(BUILD)/libcore/hdf5/btree.o libcore/include/h5log/btree.h tests/unit/tharness.h tests/unit/oom.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LIBCORE_PRIV) -Itests/unit $(HDF5_CFLAGS) $< $(BUILD)/libcore/hdf5/btree.o -o $@ $(LDFLAGS) \
		$(OOM_WRAP) $(HDF5_LIBS)

$(BUILD)/tests/test_watch: tests/fused/test_watch.c $(BUILD)/fused/watch.o fused/watch.h tests/unit/tharness.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Ifused -Itests/unit $< $(BUILD)/fused/watch.o -o $@ $(LDFLAGS)

$(BUILD)/tests/test_badlog: tests/fused/test_badlog.c $(BUILD)/fused/badlog.o fused/badlog.h tests/unit/tharness.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Ifused -Itests/unit $< $(BUILD)/fused/badlog.o -o $@ $(LDFLAGS) -lpthread

# the daemon's read path without FUSE; the log file is written by libh5log
# on one rank (MPI singleton)
LFILE_OBJS := $(BUILD)/fused/lfile.o $(BUILD)/fused/watch.o $(BUILD)/fused/badlog.o $(BUILD)/fused/tbuf.o $(BUILD)/fused/skel.o $(BUILD)/fused/cache.o $(BUILD)/fused/memvfd.o
$(BUILD)/tests/test_lfile: tests/fused/test_lfile.c $(LFILE_OBJS) $(BUILD)/libh5log.a tests/unit/tharness.h tests/unit/oom.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Ifused -Itests/unit $(HDF5_CFLAGS) $< $(LFILE_OBJS) -o $@ $(LDFLAGS) $(OOM_WRAP) $(LINK_LIB)

# the canonical file at scale: canon's scale attributes against H5DS, many
# variables, sparse chunks (log files written on one rank)
# (it builds schemas op by op: libcore's private schema.h)
$(BUILD)/tests/test_canon: tests/fused/test_canon.c $(LFILE_OBJS) $(BUILD)/libh5log.a tests/unit/tharness.h tests/unit/oom.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LIBCORE_PRIV) -Ifused -Itests/unit $(HDF5_CFLAGS) $< $(LFILE_OBJS) -o $@ $(LDFLAGS) \
		$(OOM_WRAP) $(LINK_LIB)

# skeletons patched in place against full builds, through libhdf5
# at most 16 live skeletons kept, slots given back (18 live files, one rank)
$(BUILD)/tests/test_livemax: tests/fused/test_livemax.c $(LFILE_OBJS) $(BUILD)/libh5log.a tests/unit/tharness.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Ifused -Itests/unit $(HDF5_CFLAGS) $< $(LFILE_OBJS) -o $@ $(LDFLAGS) $(LINK_LIB)

# the ticker's rounds woken between ticks (inotify), one live file
$(BUILD)/tests/test_ticker: tests/fused/test_ticker.c $(LFILE_OBJS) $(BUILD)/libh5log.a tests/unit/tharness.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Ifused -Itests/unit $(HDF5_CFLAGS) $< $(LFILE_OBJS) -o $@ $(LDFLAGS) $(LINK_LIB)

# (with skel.c's test hooks: a patch made to fail half way)
$(BUILD)/tests/test_skelpatch: tests/fused/test_skelpatch.c $(subst skel.o,skel_hooks.o,$(LFILE_OBJS)) $(BUILD)/libh5log.a tests/unit/tharness.h tests/unit/oom.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Ifused -Itests/unit $(HDF5_CFLAGS) $< $(subst skel.o,skel_hooks.o,$(LFILE_OBJS)) -o $@ $(LDFLAGS) \
		$(OOM_WRAP) $(LINK_LIB)

# the same test with every block served by gathering (HFS_ASSEMBLE_MAX 0):
# the path of blocks too large to assemble, on every kind of block
$(BUILD)/fused/lfile_gather.o: fused/lfile.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DHFS_ASSEMBLE_MAX=0 -Ifused $(HDF5_CFLAGS) $(FUSE_CFLAGS) -c $< -o $@
$(BUILD)/tests/test_lfile_gather: tests/fused/test_lfile.c $(subst lfile.o,lfile_gather.o,$(LFILE_OBJS)) $(BUILD)/libh5log.a tests/unit/tharness.h tests/unit/oom.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DLFILE_ALL_GATHER -Ifused -Itests/unit $(HDF5_CFLAGS) $< $(subst lfile.o,lfile_gather.o,$(LFILE_OBJS)) -o $@ $(LDFLAGS) $(OOM_WRAP) $(LINK_LIB)

$(BUILD)/demo/%: demo/%.c $(BUILD)/libh5log.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(HDF5_CFLAGS) $< -o $@ $(LDFLAGS) $(LINK_LIB)

demo: deps-check
	@$(MAKE) --no-print-directory all $(BUILD)/demo/demo_writer
	@bash demo/run_demo.sh $(BUILD)

$(BUILD)/bench/%: bench/%.c $(BUILD)/libh5log.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(HDF5_CFLAGS) $< -o $@ $(LDFLAGS) $(LINK_LIB)

check: deps-check
	@$(MAKE) --no-print-directory WERROR=-Werror all fuzz-build
	@BUILD=$(BUILD) FUZZ_BUILD=$(FUZZ_BUILD) PY=$(PY) bash tests/run_all.sh

# libFuzzer harnesses (tests/fuzz): libcore's reader side compiled into each
# with clang, ASan and UBSan. `make fuzz` runs each for FUZZ_SECONDS;
# `make check` replays the committed corpus and runs a few thousand
# deterministic mutations of each (tests/fuzz/run_fuzz.sh).
FUZZ_CC ?= clang
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZERS := jscan tick file
FUZZ_CFLAGS := -g -O1 -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -fno-omit-frame-pointer \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Ilibcore/include $(LIBCORE_PRIV) -Itests/fuzz
CORE_SRCS := $(CORE_MODS:%=libcore/src/%.c)

$(FUZZ_BUILD)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_common.h $(CORE_SRCS) $(wildcard libcore/src/*/*.h libcore/include/*.h libcore/include/h5log/*.h tests/fuzz/*.h)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $< $(CORE_SRCS) -o $@ $(XXH_LIBS) -lpthread -lm

fuzz-build: $(FUZZERS:%=$(FUZZ_BUILD)/fuzz_%)

fuzz: fuzz-build
	@bash tests/fuzz/run_fuzz.sh long $(FUZZ_BUILD) $(FUZZ_SECONDS)

asan:
	$(MAKE) BUILD=build-asan SAN="-fsanitize=address,undefined -fno-omit-frame-pointer" CFLAGS="-O1 -g" check

# ThreadSanitizer over the multi-threaded modules (cache, reader): their
# unit tests run many threads; MPI programs are not run under TSan.
TSAN_TESTS := test_cache test_reader test_index
tsan:
	$(MAKE) BUILD=build-tsan SAN="-fsanitize=thread" CFLAGS="-O1 -g" $(TSAN_TESTS:%=build-tsan/tests/%)
	@p=0; f=0; for t in $(TSAN_TESTS); do \
		out=$$(TSAN_OPTIONS=halt_on_error=1 build-tsan/tests/$$t 2>&1); rc=$$?; \
		line=$$(echo "$$out" | grep -E '^[0-9]+ passed, [0-9]+ failed$$' | tail -1); \
		echo "== tsan $$t: $${line:-no result (rc $$rc)}"; \
		if [ $$rc -ne 0 ] || [ -z "$$line" ]; then echo "$$out" | tail -30; f=$$((f+1)); \
		else p=$$((p+$${line%% *})); fi; done; \
		echo "$$p passed, $$f failed"; [ $$f -eq 0 ]

# the model-based differential test on random scripts until SECONDS pass
SECONDS ?= 60
soak: all
	@H5LOG_BUILD=$(abspath $(BUILD)) $(PY) tests/e2e/soak.py $(SECONDS) $(if $(LIVE),--live)

# the writer benchmark's peer PnetCDF (Debian's libpnetcdf-dev, OpenMPI)
$(BENCH): bench/bench_write.c $(BUILD)/libh5log.a
	@pkg-config --exists pnetcdf || { echo "bench_write needs PnetCDF (libpnetcdf-dev): run make deps" >&2; exit 1; }
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(HDF5_CFLAGS) $< -o $@ $(LDFLAGS) -lpnetcdf $(LINK_LIB)

bench-write: all $(BENCH) $(BUILD)/bench/bench_flushes $(BUILD)/bench/bench_copy
	@bash bench/bench_write.sh $(BUILD)

bench-read: all $(BUILD)/bench/mkbig $(BUILD)/bench/readvar
	@bash bench/bench_read.sh $(BUILD)

bench-standalone: all $(BUILD)/bench/bench_close
	@$(PY) bench/bench_standalone.py $(BUILD)

bench-memory: all $(BUILD)/bench/mkrecords
	@bash bench/bench_memory.sh $(BUILD)

bench-ticks: all $(BUILD)/bench/bench_flushes
	@bash bench/bench_ticks.sh $(BUILD)
# live_many writes the live files of bench-scale and tests/e2e/test_scale.py;
# h5logfs_hooks is the daemon with skel.c's and fs.c's test hooks (slow or
# failing skeleton builds, every open kept), for the e2e tests and
# bench-scale only
HOOKS_DAEMON := $(BUILD)/tests/h5logfs_hooks
tests: $(BUILD)/bench/live_many $(BUILD)/bench/bench_flushes $(HOOKS_DAEMON)
HOOKED_OBJS := $(patsubst $(BUILD)/fused/fs.o,$(BUILD)/fused/fs_hooks.o,$(subst skel.o,skel_hooks.o,$(FUSED_OBJS)))
$(BUILD)/fused/%_hooks.o: fused/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DHFS_TEST_HOOKS -Ifused $(HDF5_CFLAGS) $(FUSE_CFLAGS) -c $< -o $@
$(HOOKS_DAEMON): $(HOOKED_OBJS) $(BUILD)/libh5log.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(HOOKED_OBJS) $(LINK_LIB) $(FUSE_LIBS)
bench-scale: all $(BUILD)/bench/live_many $(BUILD)/bench/h5floor $(HOOKS_DAEMON)
	@bash bench/bench_scale.sh $(BUILD)
bench-longlog: all $(BUILD)/bench/bench_flushes
	@bash bench/bench_longlog.sh $(BUILD)
BENCH_TICKS ?= 100000
BENCH_VARS ?= 1000
BENCH_NP ?= 2
BENCH_ROUNDS ?= 5
BENCH_DIR ?= /tmp
bench-open: all $(BUILD)/bench/bench_open
	@d=$$(mktemp -d $(BENCH_DIR)/bench-open.XXXXXX) && \
	OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe -np $(BENCH_NP) \
		$(BUILD)/bench/bench_open $$d/open.h5 $(BENCH_TICKS) $(BENCH_VARS) $(BENCH_ROUNDS); rc=$$?; rm -rf $$d; exit $$rc
# bench_finalize is built with the tests too (tests/e2e/test_bench_finalize.py)
tests: $(BUILD)/bench/bench_finalize $(BUILD)/bench/bench_close
bench-finalize: all $(BUILD)/bench/bench_finalize
	@$(PY) bench/bench_finalize.py $(BUILD)
# bench_swmr_writer is built with the tests too (tests/e2e/test_swmr.py)
tests: $(BUILD)/bench/bench_swmr_writer
bench-swmr: all $(BUILD)/bench/bench_swmr_writer
	@$(PY) bench/bench_swmr.py $(BUILD)

# the seed benchmark (bench/seed/seedbench.py; docs/performance.md, "Writing and closing")
SETUP ?= quick
ITERATIONS ?= 3
RANKS ?= 1,2
bench-seed: all
	@$(PY) bench/seed/seedbench.py --build $(BUILD) --setup $(SETUP) --iterations $(ITERATIONS) \
		--ranks $(RANKS) --out $(BUILD)/bench-seed

clean:
	rm -rf build build-asan build-tsan build-fuzz

include mk/python.mk
include mk/install.mk

# header dependencies written by -MMD (absent before the first build)
-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
