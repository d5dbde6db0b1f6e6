/*
 * main.c -- `ktune SUBCOMMAND ...`: dispatch only. Each subcommand parses its
 * own flags and returns the exit code; this is the one place that exits.
 */
#include <stdio.h>
#include <string.h>

#include "build_commit.h"	/* $(BUILD)/, made by cli/module.mk */
#include "cli.h"
#include "../tuner/worker.h"

struct subcommand {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
};

static const struct subcommand commands[] = {
	{ "run", cmd_run, "the main job: tune the development suite on this machine's GPU, or serve the shipped H200 results" },
	{ "devices", cmd_devices, "list GPUs this machine has and the devices in the database" },
	{ "families", cmd_families, "list kernel families, their shape keys and parameter spaces" },
	{ "sweep", cmd_sweep, "tune one family at one shape on one GPU (resumable)" },
	{ "trials", cmd_trials, "list sweeps, or the trials of one sweep" },
	{ "replay", cmd_replay, "run search strategies against recorded sweeps (no GPU)" },
	{ "best", cmd_best, "the best known config for a family, shape and device" },
	{ "serve", cmd_serve, "the HTTP service over the database" },
	{ "export", cmd_export, "write tuned tables as a C header, JSON or .cu sources" },
	{ "merge", cmd_merge, "fold databases from several hosts into one" },
	{ "import", cmd_import, "load a JSON export (e.g. data/h200-results.json) into the database" },
	{ "env", cmd_env, "the environment variables ktune and its tests read, and their values" },
	{ NULL, NULL, NULL },
};

static void usage(FILE *f)
{
	const struct subcommand *c;

	fprintf(f, "usage: ktune COMMAND [options]   (ktune COMMAND --help for its options)\n\n"
		   "ktune finds, for each GPU and problem shape, the fastest verified config of a\n"
		   "family of GPU kernels, stores every trial in SQLite and hands the winners out.\n\n"
		   "commands:\n");
	for (c = commands; c->name; c++)
		fprintf(f, "  %-9s %s\n", c->name, c->summary);
	fprintf(f, "\nevery command takes --json and --help; those that read a database take --db PATH\n"
		   "(default $KTUNE_DB, else ./ktune.db). ktune env lists the environment variables.\n");
}

int main(int argc, char **argv)
{
	const struct subcommand *c;

	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(argv[1], "--version") == 0) {
		printf("ktune %s (commit %s)\n", KTUNE_VERSION, KT_BUILD_COMMIT);
		return 0;
	}
	/* The isolated GPU worker: this same binary, exec'ed by a sweep. */
	if (strcmp(argv[1], "__worker") == 0)
		return worker_child_main(argc - 1, argv + 1);
	for (c = commands; c->name; c++)
		if (strcmp(argv[1], c->name) == 0)
			return c->fn(argc - 1, argv + 1);
	fprintf(stderr, "ktune: unknown command '%s'\n\n", argv[1]);
	usage(stderr);
	return 2;
}
