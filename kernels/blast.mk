# kernels/blast.mk: the BLAST structured linear layer (family blast), its
# mixing and reference template and its tests
LIB_SRCS += kernels/blast.c
TEMPLATES += templates/blast.cu templates/blast_fused.cu templates/blast_s1tc.cu
TESTS += test_blast
