# templates/: CUDA C++ compiled at run time with NVRTC, embedded at build time.
# Every file here is also handed to NVRTC as an includable header by its
# file name (e.g. #include "common.cuh").
LIB_SRCS += templates/templates.c
TEMPLATES += templates/common.cuh templates/gemm.cu templates/ref.cu templates/planted.cu
