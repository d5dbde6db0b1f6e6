# tests/: shared test support (each module's module.mk adds its test programs)
TEST_SUPPORT_SRCS += tests/testutil.c tests/plan_emu.c tests/plan_emu_blast.c \
	tests/plan_emu_monarch.c tests/famtest.c
TESTS += test_runtime test_conformance
