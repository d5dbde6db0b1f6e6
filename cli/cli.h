/*
 * cli.h -- the ktune subcommands and the helpers they share.
 *
 * Each cmd_* function is a subcommand's main: it parses its own flags
 * (every one takes --help, --json and --db PATH), prints its result and
 * returns the process exit code: 0 success, 1 failure, 2 bad usage. None
 * calls exit().
 */
#ifndef KT_CLI_H
#define KT_CLI_H

#include <jansson.h>
#include <stdio.h>

#include "../util/err.h"

int cmd_run(int argc, char **argv);	/* the main job */
int cmd_devices(int argc, char **argv);
int cmd_families(int argc, char **argv);
int cmd_sweep(int argc, char **argv);
int cmd_trials(int argc, char **argv);
int cmd_replay(int argc, char **argv);	/* cli/cmd_replay.c */
int cmd_best(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_merge(int argc, char **argv);
int cmd_import(int argc, char **argv);	/* server/import.h: load a JSON export */
int cmd_env(int argc, char **argv);	/* cli/cmd_env.c: util/knobs.h's table */

/* $KTUNE_DB, else "./ktune.db". */
const char *cli_default_db(void);
/* "ktune CMD: error: MESSAGE" on stderr (or a JSON error object on stdout
 * when json is set); returns the exit code for the error (2 for KT_EINVAL,
 * 1 otherwise). */
int cli_fail(const char *cmd, int json, const struct kt_err *err);
/* "ktune CMD: MESSAGE\nTry 'ktune CMD --help'." on stderr; returns 2. */
int cli_usage_error(const char *cmd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Prints j (indented) and a newline on stdout, then drops the reference.
 * Returns 0, or 1 when it could not be written. */
int cli_print_json(json_t *j);
/* The path of the running ktune binary (for exec'ing the worker). */
const char *cli_self_exe(void);

/* One flag of a subcommand: "--name VALUE", "--name=VALUE" or "--name". */
struct cli_opt {
	const char *name;	/* without the dashes */
	int has_arg;		/* 1: takes a value, stored in *val */
	const char **val;	/* has_arg: where the value goes */
	int *flag;		/* !has_arg: set to 1 when present */
	/* Optional, for a flag that may repeat: each value is appended to
	 * multi[] (at most maxmulti) and counted in *nmulti; val is unused. */
	const char **multi;
	int *nmulti;
	int maxmulti;
};
/* Parses argv[1..argc-1] against opts (terminated by name == NULL); other
 * words go to pos[] (at most maxpos). Returns 0, 1 when --help/-h was given
 * (the caller prints its help and returns 0), or 2 after printing a usage
 * error (unknown flag, missing value, too many arguments). */
int cli_parse(const char *cmd, int argc, char **argv, const struct cli_opt *opts,
	      char **pos, int maxpos, int *npos);
/* Parses a whole non-negative number; -1 when text is not one. */
long cli_parse_long(const char *text);

/* Shared by `sweep` and `run` (cli/cmd_sweep.c). */
struct sweep_opts;
struct sweep_summary;
/* Runs one sweep with the progress line and ^C handling of the CLI. */
int cli_sweep_one(const char *cmd, struct sweep_opts *o, int json, struct sweep_summary *sum,
		  struct kt_err *err);
json_t *cli_sweep_summary_json(const char *family, const char *shape,
			       const struct sweep_summary *s);
void cli_sweep_summary_print(const char *family, const char *shape,
			     const struct sweep_summary *s);

#endif
