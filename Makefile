# ktune -- one readable Makefile. Each module lists its sources in its own
# module.mk (sources listed, never globbed); this file holds the rules.
#
#   make run             (README) install dependencies, build, run the main job
#   make check           (README) install dependencies, build, run every test
#   make                 build build/ktune and the test programs
#   make test            the test suites (GPU suites skip without a GPU)
#   make SANITIZE=address,undefined test    the same under ASan + UBSan
#   make WERROR=1        warnings are errors (CI)
#   make STATIC_DEPS=1   link SQLite, jansson, libmicrohttpd statically, for
#                        taking the binary to a machine without them
#   make V=1             show the full command lines
#   make runtime         build/libktune.a and build/libktune.so (libktune,
#                        include/ktune.h: the launch runtime alone) and
#                        build/libktune_db.a (its database reader)

CC      ?= cc
CXX     ?= c++
CUDA    ?= /usr/local/cuda
BUILD   ?= build
SANITIZE ?=
WERROR  ?= 0
STATIC_DEPS ?= 0

WARN     = -Wall -Wextra -Wshadow -Wstrict-prototypes -Wno-unused-parameter -Wno-missing-field-initializers
CFLAGS  ?= -O2 -g
ALL_CFLAGS = -std=c11 $(WARN) $(CFLAGS) -MMD -MP -pthread
KTUNE_VERSION ?= 0.1.0
CPPFLAGS += -DKTUNE_VERSION='"$(KTUNE_VERSION)"'
CPPFLAGS += -D_GNU_SOURCE -I. -I$(BUILD) -I$(CUDA)/include -DKT_CUDA_HOME='"$(CUDA)"'
LDFLAGS += -L$(CUDA)/lib64 -Wl,-rpath,$(CUDA)/lib64 -pthread

ifeq ($(WERROR),1)
ALL_CFLAGS += -Werror
endif
ifneq ($(SANITIZE),)
ALL_CFLAGS += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer
LDFLAGS += -fsanitize=$(SANITIZE)
endif
ifeq ($(STATIC_DEPS),1)
DEP_LIBS = -Wl,-Bstatic -lsqlite3 -ljansson -lmicrohttpd -Wl,-Bdynamic -lgnutls
CUNIT_LIB = -Wl,-Bstatic -lcunit -Wl,-Bdynamic
else
DEP_LIBS = -lsqlite3 -ljansson -lmicrohttpd
CUNIT_LIB = -lcunit
endif
LDLIBS = $(DEP_LIBS) -lnvrtc -ldl -lm

ifeq ($(V),1)
Q =
else
Q = @
endif

LIB_SRCS =
CLI_SRCS =
TESTS =
TEST_SUPPORT_SRCS =
TEMPLATES =
EXTRA_LIB_OBJS =
GEN_SRCS = $(BUILD)/templates_gen.c

include util/module.mk
include kernels/module.mk
include kernels/blockattn.mk
include kernels/monarch.mk
include kernels/blast.mk
include templates/module.mk
include db/module.mk
include runtime/module.mk
include tuner/module.mk
include tuner/worker.mk
include server/module.mk
include cli/module.mk
include tests/module.mk

# While modules are being written side by side, a partial build (one test
# program) archives the listed sources that exist; `all` and `test` first
# insist that every listed source is there.
MISSING_SRCS = $(filter-out $(wildcard $(LIB_SRCS) $(CLI_SRCS) $(TEMPLATES)),$(LIB_SRCS) $(CLI_SRCS) $(TEMPLATES))
LIB_OBJS = $(patsubst %.c,$(BUILD)/obj/%.o,$(filter $(wildcard $(LIB_SRCS)),$(LIB_SRCS))) $(BUILD)/obj/templates_gen.o \
	$(EXTRA_LIB_OBJS)
CLI_OBJS = $(patsubst %.c,$(BUILD)/obj/%.o,$(CLI_SRCS))
TEST_SUPPORT_OBJS = $(patsubst %.c,$(BUILD)/obj/%.o,$(TEST_SUPPORT_SRCS))
TEST_BINS = $(patsubst %,$(BUILD)/tests/%,$(TESTS))

all: check-sources $(BUILD)/ktune $(TEST_BINS) $(BUILD)/kdigest runtime

check-sources:
	@if [ -n "$(strip $(MISSING_SRCS))" ]; then echo "missing sources: $(MISSING_SRCS)"; exit 1; fi

# libktune_core.a: every module of ktune (the binary and the tests link it);
# libktune.a / .so: the launch runtime alone (runtime/module.mk).
$(BUILD)/ktune: $(CLI_OBJS) $(BUILD)/libktune_core.a
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $(CLI_OBJS) $(BUILD)/libktune_core.a $(LDLIBS)

$(BUILD)/libktune_core.a: $(LIB_OBJS)
	@echo "  AR      $@"
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -c -o $@ $<

$(BUILD)/obj/templates_gen.o: $(BUILD)/templates_gen.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -c -o $@ $<

# A digest of every kernel binary a fixed set of configs compiles to: two
# commits' lists compared (tools/same_kernels.sh) prove a restructuring
# changed no kernel, without a GPU.
$(BUILD)/kdigest: $(BUILD)/obj/tools/kdigest.o $(BUILD)/libktune_core.a
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(BUILD)/libktune_core.a $(LDLIBS)

# The hand-run CUDA probes in tools/ (not part of ktune; run on the GPU
# machine): the measurements docs/families/ and bench/NOTES-*.md cite --
# GEMM tiles against cuBLAS, copy rates, the cost of BLAST's phases. CI
# builds them so that they keep compiling against the templates; each
# file's opening comment says how to run it.
NVCC ?= $(CUDA)/bin/nvcc
PROBES = gemm ingest mix phase fcl
PROBE_FLAGS = -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -Itemplates
PROBE_FLAGS_gemm = -lcublas
PROBE_FLAGS_fcl = -DFB_B=16 -DFB_R=256 -DFB_NB=128 -DFB_MB=128 -DFB_T=32 -DFB_G=1 \
	-DFB_STAGES=2 -DFB_RESIDENT=1
probes: $(patsubst %,$(BUILD)/probes/%_probe,$(PROBES))

$(BUILD)/probes/%_probe: tools/%_probe.cu tools/probe.h $(TEMPLATES)
	@mkdir -p $(dir $@)
	@echo "  NVCC    $<"
	$(Q)$(NVCC) $(PROBE_FLAGS) -o $@ $< $(PROBE_FLAGS_$*)

# Templates are embedded in the binary so that ktune is self-contained.
$(BUILD)/embed: tools/embed.c
	@mkdir -p $(BUILD)
	$(Q)$(CC) -std=c11 -O1 -Wall -o $@ $<

$(BUILD)/templates_gen.c: $(BUILD)/embed $(filter $(wildcard $(TEMPLATES)),$(TEMPLATES))
	@echo "  EMBED   $(filter $(wildcard $(TEMPLATES)),$(TEMPLATES))"
	$(Q)$(BUILD)/embed $@ $(filter $(wildcard $(TEMPLATES)),$(TEMPLATES))

$(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(TEST_SUPPORT_OBJS) $(BUILD)/libktune_core.a
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(TEST_SUPPORT_OBJS) $(BUILD)/libktune_core.a $(CUNIT_LIB) $(LDLIBS)

# The README's test command. Every suite runs, then the result is summed up;
# the ktune binary is built first because CLI and worker tests run it;
# tests/bench/run.sh checks the bench scripts that write bench/results/.
test: check-sources $(BUILD)/ktune $(BUILD)/kdigest $(TEST_BINS)
	@KTUNE_BIN=$(abspath $(BUILD)/ktune) tools/run-tests.sh $(TEST_BINS) tests/bench/run.sh

# Every suite but the NVRTC compile-everything one (the sanitizer pass).
test-fast: check-sources $(BUILD)/ktune $(BUILD)/kdigest $(TEST_BINS)
	@KTUNE_BIN=$(abspath $(BUILD)/ktune) tools/run-tests.sh $(filter-out %/test_compile,$(TEST_BINS))

# The README's two commands: each installs what it needs first.
deps:
	@CUDA=$(CUDA) tools/deps.sh

run: deps
	@$(MAKE) --no-print-directory all
	$(BUILD)/ktune run

check: deps
	@$(MAKE) --no-print-directory test

clean:
	rm -rf $(BUILD)

.PHONY: all check-sources test test-fast clean deps run check runtime probes
.SECONDARY:

# header dependencies of both object trees: a stale pic object (libktune)
# built against an older struct layout corrupts memory at run time
-include $(shell find $(BUILD)/obj $(BUILD)/pic -name '*.d' 2>/dev/null)
