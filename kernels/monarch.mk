# kernels/monarch.mk: the Monarch structured linear layer (family monarch),
# its data-movement and reference template and its tests
LIB_SRCS += kernels/monarch.c
TEMPLATES += templates/monarch.cu templates/monarch_fused.cu
TESTS += test_monarch
