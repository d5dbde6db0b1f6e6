/*
 * worker_child_stub.c -- a minimal `ktune __worker` for the worker tests,
 * for when the full ktune binary is not at hand (KTUNE_WORKER_BIN points at
 * it). Long-term the tests exec $KTUNE_BIN, the real binary.
 */
#include <string.h>

#include "../tuner/worker.h"

int main(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "__worker") != 0)
		return 2;
	return worker_child_main(argc - 1, argv + 1);
}
