/*
 * cmd_merge.c -- `ktune merge A.db B.db ... [-o OUT.db]`: fold databases
 * swept on several hosts into the one that `ktune serve` reads.
 *
 * Every input is checked (exists, is ktune's, not newer) before the output
 * is opened, so a refused input leaves the output exactly as it was; each
 * input is then merged in its own transaction.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "db/store.h"

static const char merge_usage[] =
	"usage: ktune merge [-o OUT.db] [--json] A.db [B.db ...]\n"
	"\n"
	"Folds the devices, sweeps, trials (with their measuring conditions),\n"
	"re-timings, baselines and compiled binaries of\n"
	"each database into OUT.db (created when missing), in the order given.\n"
	"Devices are matched by UUID, problems and configs by their keys, sweeps\n"
	"by device, problem, strategy, options and start time (an imported sweep:\n"
	"the start of the sweep it was exported from), so merging a file twice, or\n"
	"databases that imported one file, adds nothing twice. Winners are\n"
	"recomputed over everything merged.\n"
	"\n"
	"A row both hold with other values is a conflict; each is printed with\n"
	"what was kept, by a rule that does not depend on the order of the inputs:\n"
	"a device's description seen last wins, a trial recorded last wins (then\n"
	"the faster). docs/merge.md has the whole rule.\n"
	"\n"
	"  -o, --output PATH  the database to merge into (default: --db)\n"
	"  --db PATH          default output: $KTUNE_DB, else ./ktune.db\n"
	"  --json             print what was added as JSON\n"
	"  --help             this text\n"
	"\n"
	"An input that is not a ktune database, or from a newer ktune, stops the\n"
	"merge before anything is written.\n";

static int same_file(const char *a, const char *b)
{
	struct stat sa, sb;

	return stat(a, &sa) == 0 && stat(b, &sb) == 0 &&
	       sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

static json_t *conflicts_json(const struct store_merge_report *r)
{
	json_t *a = json_array();
	int i;

	for (i = 0; a && i < r->nitems; i++)
		json_array_append_new(a, json_pack("{s:s,s:s,s:s,s:s}", "table", r->items[i].table,
						   "key", r->items[i].key, "kept", r->items[i].kept,
						   "dropped", r->items[i].dropped));
	return a;
}

static json_t *counts_json(const struct store_merge_counts *c)
{
	return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
			 "devices", (json_int_t)c->devices, "problems", (json_int_t)c->problems,
			 "configs", (json_int_t)c->configs, "sweeps", (json_int_t)c->sweeps,
			 "trials", (json_int_t)c->trials, "measurements", (json_int_t)c->measurements,
			 "baselines", (json_int_t)c->baselines,
			 "binaries", (json_int_t)c->binaries);
}

static void counts_add(struct store_merge_counts *sum, const struct store_merge_counts *c)
{
	sum->devices += c->devices;
	sum->problems += c->problems;
	sum->configs += c->configs;
	sum->sweeps += c->sweeps;
	sum->trials += c->trials;
	sum->measurements += c->measurements;
	sum->baselines += c->baselines;
	sum->binaries += c->binaries;
}

int cmd_merge(int argc, char **argv)
{
	struct store_merge_counts added, total;
	struct kt_err err = { 0 };
	struct store *st = NULL;
	const char *out_path = NULL, *db = NULL;
	const char **inputs = NULL;
	json_t *report = NULL, *list = NULL;
	int ninputs = 0, json = 0, i, opts_done = 0, rc = 1;
	long conflicts = 0;

	memset(&total, 0, sizeof(total));
	if (!(inputs = calloc((size_t)(argc > 0 ? argc : 1), sizeof(*inputs)))) {
		kt_err_set(&err, KT_EINTERNAL, "out of memory");
		rc = cli_fail("merge", 0, &err);
		goto out;
	}
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (opts_done || a[0] != '-' || strcmp(a, "-") == 0) {
			inputs[ninputs++] = a;
		} else if (strcmp(a, "--") == 0) {
			opts_done = 1;
		} else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			fputs(merge_usage, stdout);
			rc = 0;
			goto out;
		} else if (strcmp(a, "--json") == 0) {
			json = 1;
		} else if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0 ||
			   strcmp(a, "--db") == 0) {
			if (i + 1 >= argc) {
				rc = cli_usage_error("merge", "%s needs a path", a);
				goto out;
			}
			if (strcmp(a, "--db") == 0)
				db = argv[++i];
			else
				out_path = argv[++i];
		} else if (strncmp(a, "--output=", 9) == 0) {
			out_path = a + 9;
		} else if (strncmp(a, "--db=", 5) == 0) {
			db = a + 5;
		} else {
			rc = cli_usage_error("merge", "unknown option '%s'", a);
			goto out;
		}
	}
	if (!out_path)
		out_path = db ? db : cli_default_db();
	if (ninputs == 0) {
		rc = cli_usage_error("merge", "no database to merge from");
		goto out;
	}

	/* Check every input before writing anything. */
	for (i = 0; i < ninputs; i++) {
		struct store *src = NULL;

		if (same_file(inputs[i], out_path)) {
			rc = cli_usage_error("merge", "%s is the output database itself", inputs[i]);
			goto out;
		}
		if (store_open(inputs[i], STORE_RO, &src, &err) < 0) {
			rc = cli_fail("merge", json, &err);
			goto out;
		}
		store_close(src);
	}

	if (store_open(out_path, STORE_RW, &st, &err) < 0) {
		rc = cli_fail("merge", json, &err);
		goto out;
	}
	if (json && (!(report = json_object()) || !(list = json_array()) ||
		     json_object_set_new(report, "output", json_string(out_path)) < 0 ||
		     json_object_set(report, "inputs", list) < 0)) {
		kt_err_set(&err, KT_EINTERNAL, "out of memory");
		rc = cli_fail("merge", json, &err);
		goto out;
	}
	for (i = 0; i < ninputs; i++) {
		struct store_merge_report rep;
		int k;

		if (store_merge_reported(st, inputs[i], &rep, &err) < 0) {
			/* NEEDSWORK: inputs before this one stay merged (each
			 * is its own transaction); only a failure the checks
			 * above cannot foresee (disk full, a file changed
			 * meanwhile) gets here. */
			rc = cli_fail("merge", json, &err);
			goto out;
		}
		added = rep.added;
		counts_add(&total, &added);
		conflicts += rep.conflicts;
		if (json) {
			json_t *one = counts_json(&added);

			if (!one || json_array_append_new(list, json_pack("{s:s, s:o, s:I, s:o}", "path",
						inputs[i], "added", one, "conflicts",
						(json_int_t)rep.conflicts, "resolved",
						conflicts_json(&rep))) < 0) {
				store_merge_report_release(&rep);
				kt_err_set(&err, KT_EINTERNAL, "out of memory");
				rc = cli_fail("merge", json, &err);
				goto out;
			}
		} else {
			printf("%s: +%ld devices, +%ld sweeps, +%ld trials"
			       " (+%ld problems, +%ld configs, +%ld measurements, +%ld baselines,"
			       " +%ld binaries)",
			       inputs[i], added.devices, added.sweeps, added.trials,
			       added.problems, added.configs, added.measurements, added.baselines,
			       added.binaries);
			printf(rep.conflicts ? "; %ld conflicts:\n" : "\n", rep.conflicts);
			for (k = 0; k < rep.nitems; k++)
				printf("  conflict in %s: %s\n    kept    %s\n    dropped %s\n",
				       rep.items[k].table, rep.items[k].key, rep.items[k].kept,
				       rep.items[k].dropped);
			if (rep.conflicts > rep.nitems)
				printf("  ... and %ld more\n", rep.conflicts - rep.nitems);
		}
		store_merge_report_release(&rep);
	}
	if (json) {
		if (json_object_set_new(report, "added", counts_json(&total)) < 0 ||
		    json_object_set_new(report, "conflicts", json_integer(conflicts)) < 0) {
			kt_err_set(&err, KT_EINTERNAL, "out of memory");
			rc = cli_fail("merge", json, &err);
			goto out;
		}
		rc = cli_print_json(report);
		report = NULL;
	} else {
		printf("merged %d database%s into %s: +%ld devices, +%ld sweeps, +%ld trials,"
		       " %ld conflicts resolved\n",
		       ninputs, ninputs == 1 ? "" : "s", out_path, total.devices, total.sweeps,
		       total.trials, conflicts);
		rc = fflush(stdout) == 0 ? 0 : 1;
	}
out:
	json_decref(list);
	json_decref(report);
	store_close(st);
	free(inputs);
	return rc;
}
