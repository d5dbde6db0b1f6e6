/*
 * cmd_best.c -- `ktune best`: the best config for a shape, with the same
 * fallback chain as GET /v1/best (server/lookup.h).
 */
#include <stdio.h>
#include <string.h>

#include "../db/store.h"
#include "../kernels/family.h"
#include "../server/explain.h"
#include "../server/lookup.h"
#include "cli.h"

static const char best_usage[] =
	"usage: ktune best --family NAME --shape KEY [--device D] [--arch sm_90]\n"
	"                  [--max-distance X] [--db PATH] [--json]\n"
	"\n"
	"Prints the best known config for the shape, from the first step that has one:\n"
	"\n"
	"  exact     the shape tuned on the device, else on another GPU of its model\n"
	"            (same name and arch; the fastest of those)\n"
	"  nearest   the closest shape tuned on the device itself (same structural\n"
	"            dims, a config valid for this shape), if within --max-distance\n"
	"  arch      exact, else nearest, on the other devices of the architecture\n"
	"  default   the family's default config\n"
	"\n"
	"Distance is over the other dims in log space: sqrt(sum (ln a - ln b)^2).\n"
	"A shape tuned for 16 tokens is a poor answer for 16384, and the defaults\n"
	"have their own rules per regime, so a nearest shape further than ln 8 (a\n"
	"factor of 8 in one dim) does not answer; the answer names the closest one\n"
	"it passed over.\n"
	"\n"
	"The answer says which (match); with --json, tuned.device_uuid names the GPU\n"
	"the config was measured on, and launch says how to run the config at the\n"
	"asked shape (programs and defines, buffers, launches with their grids), as\n"
	"the export does for tuned shapes.\n"
	"\n"
	"  --family NAME   kernel family (ktune families)\n"
	"  --shape KEY     e.g. tokens=1024,in=4096,out=4096\n"
	"  --device D      device uuid, id or name; default: the only one in the db,\n"
	"                  or the first when all share one name\n"
	"  --arch ARCH     fall back to this architecture when the device is unknown\n"
	"  --max-distance X  nearest shapes only within log-distance X (default\n"
	"                  2.079 = ln 8; 0: exact or default only; inf: no limit)\n"
	"  --db PATH       database (default $KTUNE_DB, else ./ktune.db)\n"
	"  --json          machine-readable answer (the same object as GET /v1/best)\n";

static void print_human(const struct lookup_query *q, const struct lookup_answer *a,
			const char *reason)
{
	char key[512], ck[512];
	const struct lookup_entry *e = a->src;

	kt_shape_key(q->fam, &q->shape, key, sizeof(key));
	kt_config_key(q->fam, &a->cfg, ck, sizeof(ck));
	printf("%s %s on %s (%s): %s\n", q->fam->name, key,
	       a->device ? a->device->name : "no known device", a->arch,
	       lookup_match_name(a->match));
	printf("  config   %s\n", ck);
	if (e) {
		/* an entry from another GPU (a sibling of the model, or the
		 * arch stage) names it: the name alone reads as the asked one */
		int other = a->device && strcmp(e->w.device_uuid, a->device->uuid) != 0;

		printf("  tuned    %s on %s%s%s%s, sweep %lld%s\n", e->w.shape_key, e->w.device_name,
		       other ? " (" : "", other ? e->w.device_uuid : "", other ? ")" : "",
		       (long long)e->w.sweep_id,
		       a->match == LOOKUP_EXACT ? "" : " (times below are for that shape)");
		if (a->distance > 0)
			printf("  distance %.3f (limit %.3f)\n", a->distance, a->max_distance);
		printf("  time     %.2f us median", e->w.median_us);
		if (e->w.retime_us > 0)
			printf(", %.2f us retimed", e->w.retime_us);
		printf("\n");
		if (e->w.cublas_us > 0)
			printf("  cuBLAS   %.2f us (%.2fx)\n", e->w.cublas_us,
			       e->w.cublas_us / e->w.median_us);
		if (e->w.naive_us > 0)
			printf("  naive    %.2f us (%.2fx)\n", e->w.naive_us,
			       e->w.naive_us / e->w.median_us);
	}
	if (a->skipped)
		printf("  skipped  %s on %s: distance %.3f, past the limit %.3f (--max-distance)\n",
		       a->skipped->w.shape_key, a->skipped->w.device_name, a->skipped_distance,
		       a->max_distance);
	if (reason)
		printf("  why      %s\n", reason);
	if (a->floor_us > 0)
		printf("  floor    %.2f us\n", a->floor_us);
	else
		printf("  floor    unknown (no measured peaks for this device)\n");
}

int cmd_best(int argc, char **argv)
{
	const char *family = NULL, *shape = NULL, *db = NULL, *maxd = NULL;
	struct lookup_query q = { 0 };
	struct lookup_answer a;
	struct lookup_table t;
	struct store *st = NULL;
	struct kt_err err = { 0 };
	char reason[640] = "";
	int json = 0, rc;
	const struct cli_opt opts[] = {
		{ "family", 1, &family, NULL }, { "shape", 1, &shape, NULL },
		{ "device", 1, &q.device, NULL }, { "arch", 1, &q.arch, NULL },
		{ "max-distance", 1, &maxd, NULL },
		{ "db", 1, &db, NULL }, { "json", 0, NULL, &json }, { NULL, 0, NULL, NULL },
	};
	int npos;

	lookup_table_init(&t);
	if ((rc = cli_parse("best", argc, argv, opts, NULL, 0, &npos)) != 0) {
		if (rc == 1)
			fputs(best_usage, stdout);
		return rc == 1 ? 0 : rc;
	}
	rc = 1;
	if (!family || !shape)
		return cli_usage_error("best", "--family and --shape are required");
	if (!(q.fam = kt_family_find(family)) || q.fam->hidden) {
		kt_err_set(&err, KT_EINVAL, "unknown family '%s' (see ktune families)", family);
		goto out;
	}
	if (kt_shape_parse(q.fam, shape, &q.shape, &err) < 0)
		goto out;
	if (lookup_query_max_distance(&q, maxd, &err) < 0)
		goto out;
	if (store_open(db ? db : cli_default_db(), STORE_RO, &st, &err) < 0)
		goto out;
	if (lookup_table_reload(&t, st, &err) < 0)
		goto out;
	if (lookup_best(&t, &q, &a, &err) < 0) {
		/* no default either: say which rule the shape broke */
		if (err.code == KT_ENOTFOUND && a.target.sm)
			explain_unsupported(q.fam, &q.shape, &a.target, a.arch,
					    "ktune families lists the shape keys", &err);
		goto out;
	}
	if (a.match == LOOKUP_DEFAULT)
		explain_default(&t, &q, &a, reason, sizeof(reason));
	if (json) {
		json_t *j = lookup_answer_json(&q, &a);

		if (j)
			json_object_set_new(j, "reason", reason[0] ? json_string(reason) : json_null());
		rc = cli_print_json(j);
	} else {
		print_human(&q, &a, reason[0] ? reason : NULL);
		rc = 0;
	}
out:
	if (err.code != KT_OK)
		rc = cli_fail("best", json, &err);
	lookup_table_release(&t);
	store_close(st);
	return rc;
}
