# runtime/: libktune, the launch runtime (include/ktune.h), and the leaves it
# shares with the tuner (the driver loader)
LIB_SRCS += runtime/cu_api.c runtime/jit_one.c
