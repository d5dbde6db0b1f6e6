# kernels/: family descriptors (a leaf module: no db, no driver, no NVRTC)
LIB_SRCS += kernels/family.c kernels/registry.c kernels/gemm_plan.c kernels/dense.c kernels/lowrank.c
TESTS += test_family test_compile
