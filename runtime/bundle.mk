# Makefile of a ktune export bundle (`ktune export --format lib --out DIR`).
#
#   make          lib/libktune_tuned.a, lib/libktune_tuned.so and include/:
#                 libktune (src/, the runtime ktune was built with) with the
#                 tuned table (ktune_table.c) and every program of the table
#                 compiled ahead of time by nvcc (kernels/pN.cu -> cubin);
#   make check    the library answers every entry from its own cubins, and
#                 the kernel sources also compile to objects that link into
#                 one binary (unique kernel names per program);
#   make check-gpu  (a GPU) every entry runs from the bundle's cubins.
#
# Use: cc -Iinclude app.c lib/libktune_tuned.a -ldl -lpthread -lm, then
#   #include "ktune_tuned.h"  ...  ktune_open_tuned(&t);
# The library loads the driver (libcuda.so.1) at run time and needs NVRTC
# only for shapes whose config no shipped cubin covers.

CUDA    ?= /usr/local/cuda
NVCC    ?= $(CUDA)/bin/nvcc
CC      ?= cc
CFLAGS  ?= -O2
NVFLAGS ?= -std=c++17 -Werror all-warnings
B        = build

include programs.mk

RT_CFLAGS = -std=c11 -D_GNU_SOURCE -DKT_CUDA_HOME='"$(CUDA)"' -Isrc -I$(B) -I$(CUDA)/include \
	-Wall -fPIC -pthread $(CFLAGS)
RT_SRCS   = $(filter %.c,$(patsubst src/%,%,$(wildcard src/runtime/*.c src/kernels/*.c src/util/*.c \
	src/templates/*.c)))
RT_OBJS   = $(patsubst %.c,$(B)/%.o,$(RT_SRCS)) $(B)/templates_gen.o
TEMPLATES = $(sort $(wildcard templates/*.cu templates/*.cuh))
BIN_OBJS  = $(patsubst %,$(B)/kernels/%_bin.o,$(PROGRAMS))
ALL_OBJS  = $(RT_OBJS) $(B)/ktune_table.o $(BIN_OBJS)

all: lib/libktune_tuned.a lib/libktune_tuned.so include/ktune_tuned.h

$(B)/embed: src/tools/embed.c
	@mkdir -p $(@D)
	$(CC) -O1 -o $@ $<

$(B)/templates_gen.c: $(B)/embed $(TEMPLATES)
	$(B)/embed $@ $(TEMPLATES)

$(B)/%.o: src/%.c
	@mkdir -p $(@D)
	$(CC) $(RT_CFLAGS) -c -o $@ $<

$(B)/templates_gen.o: $(B)/templates_gen.c
	$(CC) $(RT_CFLAGS) -c -o $@ $<

# One cubin per program, for exactly its target (GENCODE_pN, programs.mk).
$(B)/kernels/%.cubin: kernels/%.cu $(TEMPLATES)
	@mkdir -p $(@D)
	$(NVCC) -cubin $(GENCODE_$*) $(NVFLAGS) -Itemplates -o $@ $<

$(B)/kernels/%_cubin.h: $(B)/kernels/%.cubin $(B)/embed
	$(B)/embed -s $@ ktune_$*_data $<

$(B)/kernels/%_bin.o: kernels/%_bin.c $(B)/kernels/%_cubin.h
	$(CC) $(RT_CFLAGS) -I$(B)/kernels -c -o $@ $<

$(B)/ktune_table.o: ktune_table.c
	@mkdir -p $(@D)
	$(CC) $(RT_CFLAGS) -c -o $@ $<

lib/libktune_tuned.a: $(ALL_OBJS)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

lib/libktune_tuned.so: $(ALL_OBJS) src/runtime/libktune.map
	@mkdir -p $(@D)
	$(CC) -shared -Wl,-soname,libktune_tuned.so -Wl,--version-script=src/runtime/libktune.map \
		-Wl,--no-undefined -o $@ $(ALL_OBJS) -ldl -lm -pthread

include/ktune_tuned.h: ktune_tuned.h src/include/ktune.h src/include/ktune_builtin.h
	@mkdir -p $(@D)
	cp src/include/ktune.h src/include/ktune_builtin.h ktune_tuned.h include/

# ---- checks ----

LINK_OBJS = $(patsubst %,$(B)/link/%.o,$(PROGRAMS))

$(B)/link/%.o: kernels/%.cu $(TEMPLATES)
	@mkdir -p $(@D)
	$(NVCC) -c $(GENCODE_$*) $(NVFLAGS) -Itemplates -o $@ $<

$(B)/link/main.o: check/link_main.cu
	@mkdir -p $(@D)
	$(NVCC) -c $(NVFLAGS) -o $@ $<

# every program's kernels, host stubs included, in one binary
$(B)/link/all: $(B)/link/main.o $(LINK_OBJS)
	$(NVCC) -o $@ $^

$(B)/check_table: check/check_table.c lib/libktune_tuned.a include/ktune_tuned.h
	$(CC) -std=c11 -Wall -Wextra -Werror -Iinclude -o $@ $< lib/libktune_tuned.a -ldl -lm -pthread

$(B)/check_gpu: check/check_gpu.c lib/libktune_tuned.a include/ktune_tuned.h
	$(CC) -std=c11 -Wall -Wextra -Werror -Iinclude -I$(CUDA)/include -o $@ $< \
		lib/libktune_tuned.a -L$(CUDA)/lib64 -Wl,-rpath,$(CUDA)/lib64 -lcudart -ldl -lm -pthread

check: $(B)/link/all $(B)/check_table $(B)/check_gpu
	$(B)/link/all
	$(B)/check_table

check-gpu: $(B)/check_gpu
	$(B)/check_gpu

clean:
	rm -rf $(B) lib include

.PHONY: all check check-gpu clean
.SECONDARY:
