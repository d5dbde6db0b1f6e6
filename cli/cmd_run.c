/*
 * cmd_run.c -- `ktune run`, the main job (DESIGN.md): on a machine with a
 * GPU, sweep the development suite on it and report the winners; on one
 * without, say so plainly and fall back to what needs no GPU.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "../kernels/family.h"
#include "../tuner/suite.h"
#include "../tuner/sweep.h"
#include "../tuner/worker.h"

static void help(void)
{
	printf("usage: ktune run [--workload ID]... [--db PATH] [--json]\n\n"
	       "The main job. With a GPU: sweeps every workload of the development suite that\n"
	       "ktune has a family for (exhaustively, resumable) on GPU 0 and prints each\n"
	       "winner beside cuBLAS and the roofline floor. Without a GPU: says so.\n\n"
	       "options:\n"
	       "  --workload ID   only this workload (repeatable is not supported: one ID)\n"
	       "  --db PATH       database (default $KTUNE_DB, else ./ktune.db)\n"
	       "  --json          one JSON document with every sweep's summary\n");
}

int cmd_run(int argc, char **argv)
{
	const char *db = NULL, *only = NULL;
	int json = 0, npos, rc, failures = 0;
	char *pos[1];
	const struct cli_opt opts[] = {
		{ "db", 1, &db, NULL }, { "workload", 1, &only, NULL }, { "json", 0, NULL, &json },
		{ NULL, 0, NULL, NULL },
	};
	const struct suite_workload *w;
	struct worker_opts wo;
	struct worker *probe = NULL;
	struct kt_err err = { 0 };
	json_t *rows = NULL;

	rc = cli_parse("run", argc, argv, opts, pos, 0, &npos);
	if (rc == 1) {
		help();
		return 0;
	}
	if (rc)
		return rc;
	if (only && !suite_find(only))
		return cli_usage_error("run", "unknown workload '%s'", only);
	worker_opts_default(&wo);
	wo.exe = cli_self_exe();
	if (worker_start(&wo, &probe, &err) != 0) {
		if (err.code != KT_ENOGPU)
			return cli_fail("run", json, &err);
		fprintf(stderr, "ktune run: no GPU on this machine (%s): nothing to tune here.\n",
			err.msg);
		return 0;
	}
	worker_stop(probe);
	if (json && !(rows = json_array()))
		return 1;
	for (w = suite_dev; w->id; w++) {
		struct sweep_opts o;
		struct sweep_summary sum;

		if (only && strcmp(only, w->id) != 0)
			continue;
		if (!kt_family_find(w->family)) {
			fprintf(stderr, "ktune run: %s: skipped, no '%s' family in this ktune yet\n", w->id,
				w->family);
			continue;
		}
		sweep_opts_default(&o);
		o.db_path = db ? db : cli_default_db();
		o.family = w->family;
		o.shape = w->shape;
		o.worker.exe = cli_self_exe();
		kt_err_clear(&err);
		if (cli_sweep_one("run", &o, json, &sum, &err) != 0) {
			cli_fail("run", 0, &err);
			failures++;
			if (err.code == KT_ENOGPU || err.code == KT_EDB || err.code == KT_ECORRUPT)
				break;
			continue;
		}
		if (json) {
			json_t *s = cli_sweep_summary_json(w->family, w->shape, &sum);

			json_object_set_new(s, "workload", json_string(w->id));
			json_array_append_new(rows, s);
		} else {
			printf("== %s\n", w->id);
			cli_sweep_summary_print(w->family, w->shape, &sum);
		}
		if (sum.interrupted)
			break;
	}
	if (json)
		return cli_print_json(json_pack("{s:o}", "sweeps", rows)) || failures ? 1 : 0;
	return failures ? 1 : 0;
}
