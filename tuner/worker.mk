# tuner/ worker: the isolated GPU child process, the driver by dlopen, measuring
LIB_SRCS += tuner/worker.c tuner/worker_child.c tuner/cuda.c kernels/selftest.c
TEMPLATES += templates/selftest.cu
TESTS += test_worker test_gpu
