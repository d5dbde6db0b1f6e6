# tuner/: space, strategy, jit, sweep orchestration (worker sources: tuner/worker.mk)
LIB_SRCS += tuner/jit.c tuner/space.c tuner/strategy.c tuner/guided.c tuner/forest.c \
	tuner/replay.c tuner/sweep.c tuner/suite.c tuner/fleet.c tuner/famjson.c
TEMPLATES += templates/probe.cu
TESTS += test_jit test_sweep test_fleet test_measure test_strategy
