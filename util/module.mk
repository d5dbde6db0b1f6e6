LIB_SRCS += util/err.c util/hash.c util/clock.c util/knobs.c
