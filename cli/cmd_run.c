/*
 * cmd_run.c -- `ktune run`, the main job (docs/design.md).
 *
 * With a GPU: sweep the development suite on GPU 0 (resumable, every trial
 * stored), print each winner beside cuBLAS and its floor, then serve the
 * database. Without one: say so plainly, load the project's own measured
 * H200 results (compiled into the binary from data/h200-results.json, with
 * their provenance) into the database when it holds no winner yet, print
 * them, and serve them -- so a newcomer can query real answers at once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "../db/store.h"
#include "../kernels/family.h"
#include "../server/import.h"
#include "../server/server.h"
#include "../tuner/suite.h"
#include "../tuner/sweep.h"
#include "../tuner/worker.h"
#include "shipped_results.h"	/* kt_shipped_results[]: data/h200-results.json */

static void help(void)
{
	printf("usage: ktune run [--workload ID] [--no-serve] [--listen HOST:PORT] [--db PATH] [--json]\n\n"
	       "The main job.\n"
	       "  With a GPU: sweeps every workload of the development suite that ktune has a\n"
	       "  family for (exhaustively, resumable) on GPU 0, prints each winner beside\n"
	       "  cuBLAS and the roofline floor, then serves the database over HTTP.\n"
	       "  Without a GPU: says so, loads the project's own measured H200 results\n"
	       "  (shipped inside ktune, with provenance) into the database if it has no\n"
	       "  winner yet, prints them and serves them.\n\n"
	       "options:\n"
	       "  --workload ID        only this workload of the suite\n"
	       "  --no-serve           stop after sweeping / loading (no HTTP server)\n"
	       "  --listen HOST:PORT   where to serve (default 127.0.0.1:8080)\n"
	       "  --db PATH            database (default $KTUNE_DB, else ./ktune.db)\n"
	       "  --json               print summaries as JSON\n");
}

/* The winners in the database, as a table (or JSON). */
static int print_winners(const char *db, int json, struct kt_err *err)
{
	struct store *st = NULL;
	struct store_winner *w = NULL;
	json_t *arr = NULL;
	int n = 0, i, rc = -1;

	if (store_open(db, STORE_RO, &st, err) != 0 || store_winners_list(st, NULL, NULL, NULL, &w, &n, err) != 0)
		goto out;
	if (json && !(arr = json_array()))
		goto out;
	if (!json)
		printf("%-26s %-8s %-42s %9s %9s  %s\n", "device", "family", "shape", "ktune us", "cuBLAS us",
		       "config");
	for (i = 0; i < n; i++) {
		if (json)
			json_array_append_new(arr, json_pack("{s:s,s:s,s:s,s:s,s:f,s:f,s:f,s:s}", "device",
							     w[i].device_name, "uuid", w[i].device_uuid,
							     "family", w[i].family, "shape", w[i].shape_key,
							     "us", w[i].median_us, "retime_us", w[i].retime_us,
							     "cublas_us", w[i].cublas_us, "config",
							     w[i].config_key));
		else
			printf("%-26s %-8s %-42s %9.2f %9.2f  %s\n", w[i].device_name, w[i].family,
			       w[i].shape_key, w[i].median_us, w[i].cublas_us, w[i].config_key);
	}
	if (json && cli_print_json(json_pack("{s:o}", "winners", arr)) != 0) {
		arr = NULL;
		goto out;
	}
	arr = NULL;
	rc = 0;
out:
	json_decref(arr);
	for (i = 0; i < n; i++)
		store_winner_release(&w[i]);
	free(w);
	store_close(st);
	return rc;
}

/* Loads the shipped H200 results into db when it has no winner yet. */
static int load_shipped(const char *db, struct kt_err *err)
{
	struct store *st = NULL;
	struct store_winner *w = NULL;
	struct import_stats stats;
	int n = 0, i, rc = -1;

	if (store_open(db, STORE_RW, &st, err) != 0 || store_winners_list(st, NULL, NULL, NULL, &w, &n, err) != 0)
		goto out;
	if (n == 0) {
		memset(&stats, 0, sizeof(stats));
		if (import_json_text(st, kt_shipped_results, sizeof(kt_shipped_results) - 1, &stats, err) != 0)
			goto out;
		fprintf(stderr, "ktune run: loaded %d measured H200 result(s) shipped with ktune "
			"(data/h200-results.json) into %s\n", stats.entries_added, db);
	}
	rc = 0;
out:
	for (i = 0; i < n; i++)
		store_winner_release(&w[i]);
	free(w);
	store_close(st);
	return rc;
}

static int serve(const char *db, const char *listen, int json)
{
	struct serve_opts so;
	struct kt_err err = { 0 };

	memset(&so, 0, sizeof(so));
	so.db_path = db;
	so.listen = listen;
	so.exe = cli_self_exe();
	if (serve_main(&so, &err) != 0)
		return cli_fail("run", json, &err);
	return 0;
}

int cmd_run(int argc, char **argv)
{
	const char *db = NULL, *only = NULL, *listen = NULL;
	int json = 0, no_serve = 0, npos, rc, failures = 0;
	char *pos[1];
	const struct cli_opt opts[] = {
		{ "db", 1, &db, NULL }, { "workload", 1, &only, NULL }, { "listen", 1, &listen, NULL },
		{ "no-serve", 0, NULL, &no_serve }, { "json", 0, NULL, &json }, { NULL, 0, NULL, NULL },
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
	if (!db)
		db = cli_default_db();
	worker_opts_default(&wo);
	wo.exe = cli_self_exe();
	if (worker_start(&wo, &probe, &err) != 0) {
		if (err.code != KT_ENOGPU)
			return cli_fail("run", json, &err);
		fprintf(stderr, "ktune run: no GPU on this machine (%s): nothing can be tuned here; "
			"serving the project's own measured H200 results instead.\n", err.msg);
		kt_err_clear(&err);
		if (load_shipped(db, &err) != 0 || print_winners(db, json, &err) != 0)
			return cli_fail("run", json, &err);
		return no_serve ? 0 : serve(db, listen, json);
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
		o.db_path = db;
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
			return 130;
	}
	if (json && cli_print_json(json_pack("{s:o}", "sweeps", rows)) != 0)
		return 1;
	if (failures)
		return 1;
	return no_serve ? 0 : serve(db, listen, json);
}
