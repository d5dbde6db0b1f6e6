# tuner/ worker: the isolated GPU child process, the driver by dlopen, measuring
LIB_SRCS += tuner/worker.c tuner/worker_child.c tuner/cuda.c kernels/selftest.c
TEMPLATES += templates/selftest.cu templates/compare.cu
TESTS += test_worker test_gpu

# A bare `ktune __worker` for working on the worker while the full binary
# does not link; the tests use it when KTUNE_WORKER_BIN names it.
$(BUILD)/worker_child_stub: $(BUILD)/obj/tests/worker_child_stub.o $(BUILD)/libktune_core.a
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(BUILD)/libktune_core.a $(LDLIBS)
