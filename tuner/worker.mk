# tuner/ worker: the isolated GPU child process, the driver by dlopen, measuring
LIB_SRCS += tuner/worker.c tuner/worker_child.c tuner/measure.c tuner/cuda.c tuner/nvml.c kernels/selftest.c
TEMPLATES += templates/selftest.cu templates/compare.cu
TESTS += test_worker test_gpu

# A bare `ktune __worker` for working on the worker while the full binary
# does not link; the tests use it when KTUNE_WORKER_BIN names it.
$(BUILD)/worker_child_stub: $(BUILD)/obj/tests/worker_child_stub.o $(BUILD)/libktune_core.a
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(BUILD)/libktune_core.a $(LDLIBS)

# A stand-in NVML for the tests (tests/fake_nvml.c): KTUNE_NVML_LIB names it.
# Built without the sanitizers: it is dlopen'ed into the worker child.
$(BUILD)/tests/fake-nvml/libnvidia-ml.so.1: tests/fake_nvml.c
	@mkdir -p $(dir $@)
	@echo "  CC      $@"
	$(Q)$(CC) -std=c11 -O1 -Wall -fPIC -shared -o $@ $<
$(BUILD)/tests/test_measure: $(BUILD)/tests/fake-nvml/libnvidia-ml.so.1
# A stand-in CUDA driver (tests/fake_cuda.c): with its folder on
# LD_LIBRARY_PATH the worker's CUDA backend runs the selftest family on the
# CPU. Built without the sanitizers, as the fake NVML.
$(BUILD)/tests/fake-cuda/libcuda.so.1: tests/fake_cuda.c
	@mkdir -p $(dir $@)
	@echo "  CC      $@"
	$(Q)$(CC) -std=c11 -O1 -Wall -Wextra -fPIC -shared -I$(CUDA)/include -o $@ $<
$(BUILD)/tests/test_measure: $(BUILD)/tests/fake-cuda/libcuda.so.1
