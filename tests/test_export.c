/*
 * test_export.c -- export (json, c, lib) and import.
 *
 * The JSON export carries each winner's plan as kernels/ computes it and
 * imports into another database with the same answers (twice: nothing
 * added); libktune reads it. The C header (libktune's compiled-in table)
 * compiles as C11 and C++17 with all warnings as errors, and a driver built
 * on it and libktune answers every stored problem and some unseen shapes as
 * the database does, on the fixture and on stores of several GPUs of one
 * model (a sibling's exact shape before a nearest one). The lib bundle of
 * the shipped H200 results builds with one make, its programs link into one
 * binary, and it answers every entry from its own cubins. The CLI (best,
 * export) agrees too.
 */
#include <jansson.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "db/store.h"
#include "kernels/family.h"
#include "server/export.h"
#include "server/import.h"
#include "server/lookup.h"
#include "include/ktune.h"
#include "tests/server/fixture.h"
#include "tests/testutil.h"

#ifndef KT_CUDA_HOME
#define KT_CUDA_HOME "/usr/local/cuda"
#endif

/* The string value, or "" when absent. */
static const char *jstr_or_empty(json_t *v)
{
	const char *s = json_string_value(v);

	return s ? s : "";
}

static struct fx_result fx;
static char db_path[512];

static int suite_init(void)
{
	snprintf(db_path, sizeof(db_path), "%s", kt_test_path("export.db"));
	return fx_build(db_path, &fx) < 0;
}

static int suite_clean(void)
{
	return 0;
}

static json_t *export_doc(const char *path, const struct export_filter *f)
{
	struct store *st = NULL;
	struct kt_err err = { 0 };
	json_t *doc = NULL;

	if (store_open(path, STORE_RO, &st, &err) < 0 || export_json(st, f, &doc, &err) < 0)
		fprintf(stderr, "export: %s\n", err.msg);
	store_close(st);
	return doc;
}

/* Every entry's launch data is what family->plan() says for its shape. */
static void test_json_plans(void)
{
	json_t *doc = export_doc(db_path, NULL), *e;
	size_t i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
	CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(doc, "format")), EXPORT_FORMAT_NAME);
	CU_ASSERT_EQUAL(json_array_size(json_object_get(doc, "entries")), FX_NPROBLEMS);
	/* every device, the A100 too, though it has no winner (the header
	 * resolves names as the store does); every family of the binary */
	CU_ASSERT_EQUAL(json_array_size(json_object_get(doc, "devices")), FX_NDEVS);
	CU_ASSERT_EQUAL(json_array_size(json_object_get(doc, "families")), kt_family_count());
	json_array_foreach(json_object_get(doc, "entries"), i, e) {
		const struct kt_family *f = kt_family_find(json_string_value(json_object_get(e, "family")));
		json_t *launch = json_object_get(e, "launch"), *l, *prog;
		struct kt_shape s;
		struct kt_config c;
		struct kt_target t;
		struct kt_plan p;
		struct kt_err err = { 0 };
		size_t k;
		int dev;

		CU_ASSERT_PTR_NOT_NULL_FATAL(f);
		CU_ASSERT_EQUAL_FATAL(kt_shape_parse(f, json_string_value(json_object_get(e, "shape_key")), &s, &err), 0);
		CU_ASSERT_EQUAL_FATAL(kt_config_parse(f, json_string_value(json_object_get(e, "config_key")), &c, &err), 0);
		for (dev = 0; dev < FX_NDEVS; dev++)
			if (strcmp(fx_devs[dev].uuid, json_string_value(json_object_get(e, "device"))) == 0)
				break;
		CU_ASSERT_FATAL(dev < FX_NDEVS);
		CU_ASSERT_EQUAL_FATAL(fx_dev_target(&fx_devs[dev], &t, &err), 0);
		CU_ASSERT_EQUAL_FATAL(f->plan(f, &s, &c, &t, &p, &err), 0);
		CU_ASSERT_EQUAL(json_array_size(json_object_get(launch, "launches")), (size_t)p.nlaunch);
		CU_ASSERT_EQUAL(json_array_size(json_object_get(launch, "prep")), (size_t)p.nprep);
		CU_ASSERT_EQUAL(json_array_size(json_object_get(launch, "programs")), (size_t)p.nprograms);
		json_array_foreach(json_object_get(launch, "launches"), k, l) {
			if (k >= (size_t)p.nlaunch)
				break;
			CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(l, "kernel")), p.launch[k].kernel);
			CU_ASSERT_EQUAL(json_integer_value(json_array_get(json_object_get(l, "grid"), 0)),
					p.launch[k].grid[0]);
			CU_ASSERT_EQUAL(json_integer_value(json_array_get(json_object_get(l, "grid"), 1)),
					p.launch[k].grid[1]);
			CU_ASSERT_EQUAL(json_integer_value(json_array_get(json_object_get(l, "block"), 0)),
					p.launch[k].block[0]);
			CU_ASSERT_EQUAL(json_integer_value(json_object_get(l, "smem")), p.launch[k].smem);
			CU_ASSERT(json_is_boolean(json_object_get(l, "cooperative")));
			CU_ASSERT_EQUAL(json_is_true(json_object_get(l, "cooperative")),
					p.launch[k].cooperative);
			CU_ASSERT(json_is_boolean(json_object_get(l, "pdl")));
			CU_ASSERT_EQUAL(json_is_true(json_object_get(l, "pdl")), p.launch[k].pdl);
			CU_ASSERT_EQUAL(json_array_size(json_object_get(l, "args")), (size_t)p.launch[k].nargs);
		}
		json_array_foreach(json_object_get(launch, "prep"), k, l)
			if (k < (size_t)p.nprep)
				CU_ASSERT_EQUAL(json_is_true(json_object_get(l, "cooperative")),
						p.prep[k].cooperative);
		prog = json_array_get(json_object_get(launch, "programs"), 0);
		CU_ASSERT_EQUAL(json_array_size(json_object_get(prog, "defines")), (size_t)p.programs[0].ndefines);
		CU_ASSERT(json_array_size(json_object_get(prog, "options")) >= (size_t)p.programs[0].ndefines + 1);
		CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(launch, "transform")), p.transform);
		/* provenance and measurements for the importer */
		CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(json_object_get(e, "sweep"),
			"provenance"), "template_hash")), "f1x7");
		CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_object_get(e, "trial"), "reps")), 50);
		CU_ASSERT(json_real_value(json_object_get(json_object_get(e, "baselines"), "cublas_dense")) > 0);
	}
	json_decref(doc);
}

/* Answers of a database for a query, as one comparable line. */
struct q {
	const char *device, *arch, *family, *shape;
};

static const struct q queries[] = {
	/* stored problems come first (filled from fx_problems) */
	{ "GPU-fx-h200", NULL, "dense", "tokens=2048,in=4096,out=4096" },
	{ "GPU-fx-h200", NULL, "dense", "tokens=120,in=4096,out=4096" },
	{ "GPU-fx-h200", NULL, "dense", "tokens=3000,in=4096,out=8192" },
	{ "GPU-fx-h200", NULL, "dense", "tokens=1,in=512,out=512" },
	/* past the distance limit (the closest, 4096 x 11008, is 2.94 away),
	 * and a ratio of exactly 8 (2 -> 16 tokens), which is within */
	{ "GPU-fx-h200", NULL, "dense", "tokens=65536,in=4096,out=4096" },
	{ "GPU-fx-h200", NULL, "dense", "tokens=2,in=4096,out=4096" },
	{ "GPU-fx-h200", NULL, "lowrank", "tokens=4096,in=4096,out=4096,rank=1024" },
	{ "GPU-fx-h200", NULL, "lowrank", "tokens=1024,in=4096,out=4096,rank=512" },
	{ "GPU-fx-h100", NULL, "lowrank", "tokens=1024,in=4096,out=4096,rank=256" },
	{ "GPU-fx-h200", NULL, "blockattn_fwd", "seqs=1152,lmax=1024,heads=4,head_dim=128,block=64,rope=0" },
	{ "GPU-fx-h200", NULL, "blockattn_fwd", "seqs=64,lmax=256,heads=4,head_dim=128,block=64,rope=1" },
	{ "GPU-fx-h100", NULL, "blockattn_fwd", "seqs=32,lmax=128,heads=4,head_dim=128,block=64,rope=0" },
	{ "GPU-fx-h100", NULL, "dense", "tokens=1024,in=4096,out=4096" },
	{ "NVIDIA H100", NULL, "dense", "tokens=512,in=2048,out=2048" },
	{ "GPU-unknown", "sm_90", "dense", "tokens=1024,in=4096,out=4096" },
	{ "GPU-unknown", NULL, "dense", "tokens=1024,in=4096,out=4096" },
	{ NULL, NULL, "dense", "tokens=1024,in=4096,out=4096" },
};
#define NQ (FX_NPROBLEMS + (int)(sizeof(queries) / sizeof(queries[0])))

static struct q query_at(int i)
{
	struct q q;

	if (i < FX_NPROBLEMS) {
		q.device = fx_devs[fx_problems[i].dev].uuid;
		q.arch = NULL;
		q.family = fx_problems[i].family;
		q.shape = fx_problems[i].shape;
		return q;
	}
	return queries[i - FX_NPROBLEMS];
}

/* "match config distance" -- config "-" for none. */
static void db_answer(const char *path, struct q q, char *out, size_t len)
{
	struct store *st = NULL;
	struct lookup_table t;
	struct lookup_query lq = { 0 };
	struct lookup_answer a;
	struct kt_err err = { 0 };
	char key[512];

	lookup_table_init(&t);
	lq.device = q.device;
	lq.arch = q.arch;
	lq.fam = kt_family_find(q.family);
	if (store_open(path, STORE_RO, &st, &err) < 0 || lookup_table_reload(&t, st, &err) < 0 ||
	    kt_shape_parse(lq.fam, q.shape, &lq.shape, &err) < 0 || lookup_best(&t, &lq, &a, &err) < 0) {
		snprintf(out, len, "none - 0");
	} else {
		kt_config_key(lq.fam, &a.cfg, key, sizeof(key));
		snprintf(out, len, "%s %s %.17g", lookup_match_name(a.match), key, a.distance);
	}
	lookup_table_release(&t);
	store_close(st);
}

static void test_import_roundtrip(void)
{
	const char *copy = kt_test_path("imported.db");
	const char *json_path = kt_test_path("export.json");
	json_t *doc = export_doc(db_path, NULL);
	struct store *st = NULL;
	struct import_stats stats;
	struct kt_err err = { 0 };
	int i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
	CU_ASSERT_EQUAL_FATAL(json_dump_file(doc, json_path, JSON_INDENT(1)), 0);
	json_decref(doc);
	CU_ASSERT_EQUAL_FATAL(store_open(copy, STORE_RW, &st, &err), 0);
	CU_ASSERT_EQUAL(import_json_file_stats(st, json_path, &stats, &err), 0);
	CU_ASSERT_EQUAL(stats.entries, FX_NPROBLEMS);
	CU_ASSERT_EQUAL(stats.entries_added, FX_NPROBLEMS);
	CU_ASSERT_EQUAL(stats.devices, FX_NDEVS);
	/* idempotent */
	CU_ASSERT_EQUAL(import_json_file_stats(st, json_path, &stats, &err), 0);
	CU_ASSERT_EQUAL(stats.entries_added, 0);
	CU_ASSERT_EQUAL(stats.entries_skipped, FX_NPROBLEMS);
	/* a broken document writes nothing */
	{
		static const char bad[] = "{\"format\":\"ktune-export\",\"version\":1,"
			"\"devices\":[{\"uuid\":\"GPU-new\",\"name\":\"X\",\"arch\":\"sm_90\"}],"
			"\"entries\":[{\"device\":\"GPU-new\",\"family\":\"dense\",\"shape_key\":\"tokens=0\"}]}";

		CU_ASSERT_EQUAL(import_json_text(st, bad, strlen(bad), &stats, &err), -1);
	}
	CU_ASSERT_EQUAL(err.code, KT_EINVAL);
	{
		struct store_device d;
		struct kt_err e2 = { 0 };

		CU_ASSERT_EQUAL(store_device_find(st, "GPU-new", &d, &e2), 0);
	}
	/* a device count a C integer cannot hold is refused, not converted
	 * (the fuzzer's l2_bytes of 1e100 was undefined behaviour) */
	{
		static const char *const fields[] = { "\"l2_bytes\":1e100", "\"sms\":-1",
						      "\"clock_mhz\":3e9", "\"smem_optin\":\"232448\"" };

		for (size_t k = 0; k < sizeof(fields) / sizeof(fields[0]); k++) {
			char doc_text[512];

			snprintf(doc_text, sizeof(doc_text),
				 "{\"format\":\"ktune-export\",\"version\":1,\"devices\":[{\"uuid\":"
				 "\"GPU-big\",\"name\":\"X\",\"arch\":\"sm_90\",%s}],\"entries\":[]}", fields[k]);
			kt_err_clear(&err);
			CU_ASSERT_EQUAL(import_json_text(st, doc_text, strlen(doc_text), &stats, &err), -1);
			CU_ASSERT_EQUAL(err.code, KT_EINVAL);
			CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "must be a number in 0.."));
		}
	}
	{
		struct store_device d;
		struct kt_err e2 = { 0 };

		CU_ASSERT_EQUAL(store_device_find(st, "GPU-big", &d, &e2), 0);
	}
	kt_err_clear(&err);
	CU_ASSERT_EQUAL(import_json_text(st, "{\"format\":\"ktune-export\",\"version\":99,\"devices\":[],\"entries\":[]}",
					 strlen("{\"format\":\"ktune-export\",\"version\":99,\"devices\":[],\"entries\":[]}"),
					 &stats, &err), -1);
	CU_ASSERT_EQUAL(err.code, KT_EINVAL);
	store_close(st);

	/* a database error halfway (here a planted trigger refusing the third
	 * trial) leaves a fresh store as it was; without the trigger the same
	 * file imports whole */
	{
		const char *part = kt_test_path("partial.db");
		static const char *const tables[] = { "devices", "problems", "configs", "sweeps",
						       "trials", "baselines" };
		struct store *ps = NULL;
		size_t k;

		kt_err_clear(&err);
		CU_ASSERT_EQUAL_FATAL(store_open(part, STORE_RW, &ps, &err), 0);
		CU_ASSERT_EQUAL_FATAL(sqlite3_exec(store_sqlite(ps),
			"CREATE TEMP TRIGGER kt_plant BEFORE INSERT ON main.trials"
			" WHEN (SELECT count(*) FROM main.trials) >= 2"
			" BEGIN SELECT RAISE(ABORT, 'planted: no room'); END", NULL, NULL, NULL), SQLITE_OK);
		CU_ASSERT_EQUAL(import_json_file_stats(ps, json_path, &stats, &err), -1);
		CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "planted"));
		CU_ASSERT_EQUAL(stats.entries_added, 0);
		CU_ASSERT_EQUAL(stats.devices, 0);
		for (k = 0; k < sizeof(tables) / sizeof(tables[0]); k++) {
			char sql[96];
			sqlite3_stmt *q = NULL;

			snprintf(sql, sizeof(sql), "SELECT count(*) FROM main.%s", tables[k]);
			CU_ASSERT_EQUAL_FATAL(sqlite3_prepare_v2(store_sqlite(ps), sql, -1, &q, NULL), SQLITE_OK);
			CU_ASSERT_EQUAL(sqlite3_step(q), SQLITE_ROW);
			CU_ASSERT_EQUAL(sqlite3_column_int64(q, 0), 0);
			if (sqlite3_column_int64(q, 0) != 0)
				fprintf(stderr, "partial import left %lld rows in %s\n",
					(long long)sqlite3_column_int64(q, 0), tables[k]);
			sqlite3_finalize(q);
		}
		CU_ASSERT_EQUAL(sqlite3_exec(store_sqlite(ps), "DROP TRIGGER kt_plant", NULL, NULL, NULL),
				SQLITE_OK);
		kt_err_clear(&err);
		CU_ASSERT_EQUAL(import_json_file_stats(ps, json_path, &stats, &err), 0);
		CU_ASSERT_EQUAL(stats.entries_added, FX_NPROBLEMS);
		store_close(ps);
	}

	/* the imported database answers every query as the original does */
	for (i = 0; i < NQ; i++) {
		char a[700], b[700];
		struct q q = query_at(i);

		db_answer(db_path, q, a, sizeof(a));
		db_answer(copy, q, b, sizeof(b));
		CU_ASSERT_STRING_EQUAL(a, b);
		if (strcmp(a, b) != 0)
			fprintf(stderr, "query %d: %s vs imported %s\n", i, a, b);
	}
	/* an export of the import carries the same winners */
	{
		json_t *d1 = export_doc(db_path, NULL), *d2 = export_doc(copy, NULL), *e1, *e2;
		size_t k;

		CU_ASSERT_PTR_NOT_NULL_FATAL(d1);
		CU_ASSERT_PTR_NOT_NULL_FATAL(d2);
		CU_ASSERT_EQUAL(json_array_size(json_object_get(d1, "entries")),
				json_array_size(json_object_get(d2, "entries")));
		json_array_foreach(json_object_get(d1, "entries"), k, e1) {
			e2 = json_array_get(json_object_get(d2, "entries"), k);
			CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(e1, "config_key")),
					       jstr_or_empty(json_object_get(e2, "config_key")));
			CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(e1, "median_us")),
					       json_real_value(json_object_get(e2, "median_us")), 1e-9);
			CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(e1, "retime_us")),
					       json_real_value(json_object_get(e2, "retime_us")), 1e-9);
			CU_ASSERT(json_equal(json_object_get(e1, "baselines"), json_object_get(e2, "baselines")));
			CU_ASSERT(json_equal(json_object_get(e1, "launch"), json_object_get(e2, "launch")));
			CU_ASSERT_PTR_NOT_NULL(json_object_get(json_object_get(json_object_get(e2, "sweep"),
				"provenance"), "imported_from"));
		}
		json_decref(d1);
		json_decref(d2);
	}
}

/* ---- the C header (format c): libktune's compiled-in table ----
 *
 * A driver built on the header and libktune (build/libktune.a) answers
 * queries with ktune_choose() as the database answers them with
 * lookup_best(): match, config (the default's too) and distance. It plans
 * for the device's arch (or the query's) with option "arch", so it needs
 * no GPU. A query the database answers with none (no device named among
 * several models, or an unknown one without an arch) has no runtime
 * counterpart (libktune always has a device: the stream's GPU) and is
 * left out; with no device named it asks for the database's first. */

static const char driver_src[] =
"#include <stdio.h>\n#include <string.h>\n#include <strings.h>\n"
"#include \"ktune_tuned.h\"\n\n"
"int main(int argc, char **argv)\n{\n"
"\tktune_table *t = NULL;\n\tchar line[1024];\n\tFILE *in = argc > 1 ? fopen(argv[1], \"r\") : NULL;\n\n"
"\tif (!in || ktune_open_tuned(&t) != KTUNE_OK)\n\t\treturn 2;\n"
"\twhile (fgets(line, sizeof(line), in)) {\n"
"\t\tchar *dev = strtok(line, \"|\\n\"), *arch = strtok(NULL, \"|\\n\");\n"
"\t\tchar *fam = strtok(NULL, \"|\\n\"), *shape = strtok(NULL, \"|\\n\");\n"
"\t\tconst char *a = arch;\n\t\tchar full[24];\n\t\tktune_choice c;\n\t\tint i;\n\n"
"\t\tif (!dev || !arch || !fam || !shape)\n\t\t\treturn 3;\n"
"\t\t/* the device's arch when the table knows it (uuid, then name) */\n"
"\t\tfor (i = 0; i < ktune_tuned.ndevices; i++)\n"
"\t\t\tif (strcmp(ktune_tuned.devices[i].uuid, dev) == 0)\n\t\t\t\tbreak;\n"
"\t\tif (i == ktune_tuned.ndevices)\n"
"\t\t\tfor (i = 0; i < ktune_tuned.ndevices; i++)\n"
"\t\t\t\tif (strcasecmp(ktune_tuned.devices[i].name, dev) == 0)\n\t\t\t\t\tbreak;\n"
"\t\tif (i < ktune_tuned.ndevices)\n\t\t\ta = ktune_tuned.devices[i].arch;\n"
"\t\tsnprintf(full, sizeof(full), \"%s%s\", a, strcmp(a, \"sm_90\") == 0 ? \"a\" : \"\");\n"
"\t\tif (ktune_set_option(t, \"device\", dev) != KTUNE_OK ||\n"
"\t\t    ktune_set_option(t, \"arch\", full) != KTUNE_OK)\n\t\t\treturn 4;\n"
"\t\tif (ktune_choose(t, fam, shape, NULL, &c) != KTUNE_OK)\n"
"\t\t\tprintf(\"none - 0 (%s)\\n\", ktune_last_error());\n"
"\t\telse\n"
"\t\t\tprintf(\"%s %s %.17g\\n\", c.match, c.config, c.distance);\n"
"\t}\n\tfclose(in);\n\tktune_close(t);\n\treturn 0;\n}\n";

static char lib_dir[1024];

/* The folder of the ktune binary, which holds libktune.a. */
static const char *libdir(void)
{
	const char *bin = kt_test_ktune();
	const char *slash = strrchr(bin, '/');

	snprintf(lib_dir, sizeof(lib_dir), "%.*s", slash ? (int)(slash - bin) : 1, slash ? bin : ".");
	return lib_dir;
}

static int run_cmd(const char *cmd, char **out)
{
	char *argv[] = { "/bin/sh", "-c", (char *)cmd, NULL };
	int rc = kt_test_exec(argv, NULL, out, 600);

	if (rc != 0)
		fprintf(stderr, "command failed (%d): %s\n%s\n", rc, cmd, out && *out ? *out : "");
	return rc;
}

#if defined(__SANITIZE_ADDRESS__)
#define SAN_FLAGS "-fsanitize=address,undefined"
#else
#define SAN_FLAGS ""
#endif

/* A parity check's queries: n of them, the i-th at(i), answered by the
 * database db and by its exported header. */
struct qset {
	const char *db;
	int n;
	struct q (*at)(int i);
};

/* The device the database resolves a query without one to: its first. */
static void first_device(const char *db, char *uuid, size_t len)
{
	struct store *st = NULL;
	struct store_device *d = NULL;
	struct kt_err err = { 0 };
	int n = 0;

	uuid[0] = 0;
	if (store_open(db, STORE_RO, &st, &err) == 0 && store_devices_list(st, &d, &n, &err) == 0 &&
	    n > 0)
		snprintf(uuid, len, "%s", d[0].uuid);
	free(d);
	store_close(st);
}

/* Writes the queries the driver answers (those with a runtime
 * counterpart), each with its line's expected answer in want[]. */
static int write_queries(const char *path, const struct qset *qs, char (*want)[700])
{
	FILE *fp = fopen(path, "w");
	char first[64];
	int i, n = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
	first_device(qs->db, first, sizeof(first));
	for (i = 0; i < qs->n; i++) {
		struct q q = qs->at(i);

		db_answer(qs->db, q, want[n], sizeof(want[n]));
		if (strncmp(want[n], "none ", 5) == 0)
			continue;
		fprintf(fp, "%s|%s|%s|%s\n", q.device ? q.device : first, q.arch ? q.arch : "sm_90",
			q.family, q.shape);
		n++;
	}
	fclose(fp);
	return n;
}

/* The driver, built as C11 or C++17 against dir/ktune_tuned.h and
 * libktune.a, answers qs as the database does. */
static void header_answers(const char *dir, int cplusplus, const char *qfile, int n,
			   char (*want)[700])
{
	char cmd[4096], *out = NULL, *line, *save = NULL, *cwd;
	int i;

	cwd = getcwd(NULL, 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(cwd);
	snprintf(cmd, sizeof(cmd),
		 "cd %s && %s %s -Wall -Wextra -Wpedantic -Werror %s -I. -I'%s/include' -o driver%s "
		 "driver.c -x none '%s%s%s/libktune.a' -ldl -lm -pthread && ./driver%s %s",
		 dir, cplusplus ? "g++ -x c++ -std=c++17" : "gcc -std=c11", SAN_FLAGS,
		 cplusplus ? "" : "-Wstrict-prototypes -Wshadow", cwd, cplusplus ? "_cpp" : "_c",
		 libdir()[0] == '/' ? "" : cwd, libdir()[0] == '/' ? "" : "/", libdir(),
		 cplusplus ? "_cpp" : "_c", qfile);
	free(cwd);
	CU_ASSERT_EQUAL_FATAL(run_cmd(cmd, &out), 0);
	line = strtok_r(out, "\n", &save);
	for (i = 0; i < n; i++, line = strtok_r(NULL, "\n", &save)) {
		CU_ASSERT_PTR_NOT_NULL_FATAL(line);
		CU_ASSERT_STRING_EQUAL(line, want[i]);
		if (strcmp(line, want[i]) != 0)
			fprintf(stderr, "%s query line %d of %s: libktune '%s', db '%s'\n",
				cplusplus ? "C++" : "C", i + 1, qfile, line, want[i]);
	}
	free(out);
}

static void header_parity(const char *dir, const char *qfile, const struct qset *qs)
{
	char path[700], (*want)[700] = calloc((size_t)qs->n, sizeof(*want));
	int n;

	CU_ASSERT_PTR_NOT_NULL_FATAL(want);
	snprintf(path, sizeof(path), "%s/driver.c", dir);
	CU_ASSERT_EQUAL_FATAL(kt_test_write_file(path, driver_src, strlen(driver_src)), 0);
	n = write_queries(qfile, qs, want);
	CU_ASSERT(n > 0);
	header_answers(dir, 0, qfile, n, want);
	header_answers(dir, 1, qfile, n, want);
	free(want);
}

/* db's C export (opened with mode) as dir/ktune_tuned.h, dir made here. */
static void write_header(const char *db, enum store_mode mode, const char *dir)
{
	struct store *st = NULL;
	struct export_bundle b = { 0 };
	struct kt_err err = { 0 };
	char path[700];

	CU_ASSERT_EQUAL_FATAL(store_open(db, mode, &st, &err), 0);
	CU_ASSERT_EQUAL_FATAL(export_build(st, EXPORT_C, NULL, &b, &err), 0);
	store_close(st);
	CU_ASSERT_EQUAL_FATAL(b.n, 1);
	CU_ASSERT_STRING_EQUAL(b.files[0].name, "ktune_tuned.h");
	/* data for libktune, not a second implementation of the lookup */
	CU_ASSERT_PTR_NOT_NULL(strstr(b.files[0].data, "static const struct ktune_builtin ktune_tuned"));
	CU_ASSERT_PTR_NULL(strstr(b.files[0].data, "ktune_best"));
	CU_ASSERT_EQUAL_FATAL(mkdir(dir, 0700), 0);
	snprintf(path, sizeof(path), "%s/ktune_tuned.h", dir);
	CU_ASSERT_EQUAL_FATAL(export_bundle_write(&b, EXPORT_C, path, &err), 0);
	export_bundle_release(&b);
}

static void test_header(void)
{
	const char *dir = kt_test_path("hdr");
	const char *qfile = kt_test_path("queries.txt");
	const struct qset qs = { db_path, NQ, query_at };

	write_header(db_path, STORE_RO, dir);
	header_parity(dir, qfile, &qs);
}

/* An empty export still compiles and opens: a known family answers the
 * default (as the server does on an empty store), an unknown one is
 * NOT_FOUND. */
static void test_header_empty(void)
{
	const char *dir = kt_test_path("hdr-empty");
	char path[700], cmd[8192], *out = NULL, *cwd;

	write_header(kt_test_path("empty.db"), STORE_RW, dir);	/* RW: creates it */
	snprintf(path, sizeof(path), "%s/t.c", dir);
	{
		static const char src[] =
			"#include <string.h>\n#include \"ktune_tuned.h\"\n"
			"int main(void)\n{\n\tktune_table *t = NULL;\n\tktune_choice c;\n\n"
			"\tif (ktune_open_tuned(&t) != KTUNE_OK || ktune_set_option(t, \"arch\", \"sm_90a\"))\n"
			"\t\treturn 1;\n"
			"\tif (ktune_choose(t, \"dense\", \"tokens=1,in=16,out=16\", NULL, &c) != KTUNE_OK ||\n"
			"\t    strcmp(c.match, \"default\") != 0)\n\t\treturn 2;\n"
			"\tif (ktune_choose(t, \"nosuch\", \"tokens=1\", NULL, &c) != KTUNE_ERROR_NOT_FOUND)\n"
			"\t\treturn 3;\n\tktune_close(t);\n\treturn 0;\n}\n";

		CU_ASSERT_EQUAL_FATAL(kt_test_write_file(path, src, strlen(src)), 0);
	}
	cwd = getcwd(NULL, 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(cwd);
	snprintf(cmd, sizeof(cmd),
		 "cd %s && gcc -std=c11 -Wall -Wextra -Wpedantic -Werror %s -I'%s/include' -o t t.c "
		 "'%s%s%s/libktune.a' -ldl -lm -pthread && ./t && g++ -std=c++17 -x c++ -Wall -Wextra "
		 "-Wpedantic -Werror %s -I'%s/include' -o tpp t.c -x none '%s%s%s/libktune.a' -ldl -lm "
		 "-pthread && ./tpp",
		 dir, SAN_FLAGS, cwd, libdir()[0] == '/' ? "" : cwd, libdir()[0] == '/' ? "" : "/",
		 libdir(), SAN_FLAGS, cwd, libdir()[0] == '/' ? "" : cwd,
		 libdir()[0] == '/' ? "" : "/", libdir());
	free(cwd);
	CU_ASSERT_EQUAL(run_cmd(cmd, &out), 0);
	free(out);
}

/* ---- the C header on several GPUs of one model ----
 *
 * fixture.h's fx_sib_devs with entries of their own. The header must give
 * lookup_best()'s answers: a sibling's exact shape before the asked
 * device's nearest one, never another model's. */
static const struct fx_sib_entry sib_entries[] = {
	{ FX_SIB_A, "dense", "tokens=2048,in=4096,out=4096", 100 },	/* 0 */
	{ FX_SIB_A, "dense", "tokens=256,in=4096,out=4096", 50 },	/* 1 */
	{ FX_SIB_B, "dense", "tokens=1024,in=4096,out=4096", 60 },	/* 2 */
	{ FX_SIB_B, "dense", "tokens=256,in=4096,out=4096", 20 },	/* 3 */
	{ FX_SIB_B, "dense", "tokens=64,in=4096,out=4096", 40 },	/* 4 */
	{ FX_SIB_B, "dense", "tokens=4096,in=4096,out=4096", 80 },	/* 5 */
	{ FX_SIB_C, "dense", "tokens=64,in=4096,out=4096", 30 },	/* 6 */
	{ FX_SIB_H100, "dense", "tokens=1024,in=4096,out=4096", 30 },	/* 7 */
	{ FX_SIB_H100, "dense", "tokens=8192,in=4096,out=4096", 200 },	/* 8 */
	{ FX_SIB_X80, "dense", "tokens=64,in=4096,out=4096", 5 },	/* 9 */
	{ FX_SIB_X80, "dense", "tokens=32,in=4096,out=4096", 5 },	/* 10 */
	{ FX_SIB_H100, "lowrank", "tokens=1024,in=4096,out=4096,rank=256", 40 },	/* 11 */
	{ FX_SIB_B, "lowrank", "tokens=512,in=4096,out=4096,rank=1024", 40 },	/* 12 */
};
#define SIB_NENTRIES (int)(sizeof(sib_entries) / sizeof(sib_entries[0]))

/* After every entry on its own device (uuid): */
static const struct q sib_queries[] = {
	/* A has 2048 near 1024: B's exact 1024 answers, not the H100's
	 * faster one (another model); by name (resolving to A) and uuid. */
	{ "NVIDIA H200", NULL, "dense", "tokens=1024,in=4096,out=4096" },
	{ "GPU-sib-a", NULL, "dense", "tokens=1024,in=4096,out=4096" },
	/* A's own exact before B's faster one; C gets B's, the fastest of
	 * its siblings'. */
	{ "NVIDIA H200", NULL, "dense", "tokens=256,in=4096,out=4096" },
	{ "GPU-sib-c", NULL, "dense", "tokens=256,in=4096,out=4096" },
	/* C's over B's (faster), not the sm_80 one's (faster still). */
	{ "nvidia h200", NULL, "dense", "tokens=64,in=4096,out=4096" },
	/* Only the sm_80 "NVIDIA H200" has 32: A's nearest answers. */
	{ "NVIDIA H200", NULL, "dense", "tokens=32,in=4096,out=4096" },
	/* B has 1024 and 4096, as near 2048 as each other: A's exact. */
	{ "GPU-sib-b", NULL, "dense", "tokens=2048,in=4096,out=4096" },
	/* Nearest stays on the asked device: A's 2048, not B's 4096 nor the
	 * H100's exact 8192. */
	{ "NVIDIA H200", NULL, "dense", "tokens=8192,in=4096,out=4096" },
	/* The H100 is no sibling: its own nearest, not the H200s' exact. */
	{ "NVIDIA H100", NULL, "dense", "tokens=64,in=4096,out=4096" },
	{ "GPU-sib-x80", NULL, "dense", "tokens=256,in=4096,out=4096" },
	/* Nothing of lowrank on A: arch, exact then nearest. */
	{ "NVIDIA H200", NULL, "lowrank", "tokens=1024,in=4096,out=4096,rank=256" },
	{ "NVIDIA H200", NULL, "lowrank", "tokens=1024,in=4096,out=4096,rank=1024" },
	{ "GPU-sib-x80", NULL, "lowrank", "tokens=512,in=4096,out=4096,rank=1024" },
	/* An unknown device of sm_90: the fastest exact of the arch. */
	{ "GPU-unknown", "sm_90", "dense", "tokens=1024,in=4096,out=4096" },
	{ "GPU-unknown", "sm_90", "dense", "tokens=64,in=4096,out=4096" },
	/* No device named: none with several models; with the H200s alone
	 * the first answers, with its siblings' exact shapes. */
	{ NULL, NULL, "dense", "tokens=1024,in=4096,out=4096" },
	{ NULL, NULL, "dense", "tokens=8192,in=4096,out=4096" },
};
#define SIB_NQUERIES (int)(sizeof(sib_queries) / sizeof(sib_queries[0]))
#define SIB_NQ (SIB_NENTRIES + SIB_NQUERIES)

static char sib_key[sizeof(sib_entries) / sizeof(sib_entries[0])][512];

static struct q sib_query_at(int i)
{
	struct q q;

	if (i < SIB_NENTRIES) {
		q.device = fx_sib_devs[sib_entries[i].dev].uuid;
		q.arch = NULL;
		q.family = sib_entries[i].family;
		q.shape = sib_entries[i].shape;
		return q;
	}
	return sib_queries[i - SIB_NENTRIES];
}

static void sib_asked_at(int i, const char **family, const char **shape)
{
	*family = sib_queries[i].family;
	*shape = sib_queries[i].shape;
}

static const struct fx_sib_set sib_set = {
	sib_entries, SIB_NENTRIES, SIB_NQUERIES, sib_asked_at, sib_key,
};

/* db answers q (query i of the set named what) with match and sibling
 * entry want (-1: a default or none, no config). */
static void answer_expect(const char *db, struct q q, const char *what, int i, const char *match,
			  int want)
{
	char got[700], expect[700];

	db_answer(db, q, got, sizeof(got));
	/* a default's config is the family's, none's "-" */
	if (want < 0)
		snprintf(expect, sizeof(expect), "%s %s", match, strcmp(match, "none") ? "" : "- ");
	else
		snprintf(expect, sizeof(expect), "%s %s ", match, sib_key[want]);
	CU_ASSERT_EQUAL(strncmp(got, expect, strlen(expect)), 0);
	if (strncmp(got, expect, strlen(expect)) != 0)
		fprintf(stderr, "%s query %d: db '%s', want '%s...'\n", what, i, got, expect);
}

/* db answers query i of sib_queries (0-based) so. */
static void sib_expect(const char *db, int i, const char *match, int want)
{
	answer_expect(db, sib_queries[i], "siblings", i, match, want);
}

static void test_header_same_model(void)
{
	char db[512], dir[512], qfile[512];
	struct qset qs = { db, SIB_NQ, sib_query_at };

	/* The five devices. The database itself answers from a sibling
	 * where the old header answered nearest (so the parity below
	 * can fail), and from no other model. */
	snprintf(db, sizeof(db), "%s", kt_test_path("siblings.db"));
	snprintf(dir, sizeof(dir), "%s", kt_test_path("hdr-sib"));
	snprintf(qfile, sizeof(qfile), "%s", kt_test_path("sib-queries.txt"));
	CU_ASSERT_EQUAL_FATAL(fx_sib_build(db, &sib_set, FX_SIB_NDEVS), 0);
	sib_expect(db, 0, "exact", 2);
	sib_expect(db, 3, "exact", 3);
	sib_expect(db, 4, "exact", 6);
	sib_expect(db, 5, "nearest", 1);
	sib_expect(db, 6, "exact", 0);
	sib_expect(db, 7, "nearest", 0);
	sib_expect(db, 15, "none", -1);
	write_header(db, STORE_RO, dir);
	header_parity(dir, qfile, &qs);

	/* The three H200s of sm_90 alone: none needs naming. */
	snprintf(db, sizeof(db), "%s", kt_test_path("siblings3.db"));
	snprintf(dir, sizeof(dir), "%s", kt_test_path("hdr-sib3"));
	CU_ASSERT_EQUAL_FATAL(fx_sib_build(db, &sib_set, FX_SIB_NMODEL), 0);
	sib_expect(db, 15, "exact", 2);
	sib_expect(db, 16, "nearest", 0);
	write_header(db, STORE_RO, dir);
	header_parity(dir, qfile, &qs);
}

/* ---- the C header with devices that have nothing tuned ----
 *
 * The siblings' store plus two GPUs without an entry: an "NVIDIA H200"
 * registered before the tuned ones (so that the name resolves to it) and an
 * "NVIDIA GH200" of sm_90 (a model of its own), registered last. The
 * database answers for them from their model or their arch; the header
 * must too, where an export of the tuned devices alone answered none or
 * resolved the name to the first tuned H200. */
static const struct fx_dev idle_devs[] = {
	{ "NVIDIA H200", "GPU-idle-h200", "sm_90", 132, 62914560, 232448 },
	{ "NVIDIA GH200", "GPU-idle-gh200", "sm_90", 132, 100663296, 232448 },
};

static const struct q idle_queries[] = {
	/* by name, the untuned H200: no H200 has 8192, so the arch (the
	 * H100's exact), not the tuned H200's nearest 2048 */
	{ "NVIDIA H200", NULL, "dense", "tokens=8192,in=4096,out=4096" },
	/* by uuid: its siblings' exact shape */
	{ "GPU-idle-h200", NULL, "dense", "tokens=1024,in=4096,out=4096" },
	/* a model of its own: the arch, exact then nearest */
	{ "NVIDIA GH200", NULL, "dense", "tokens=1024,in=4096,out=4096" },
	{ "GPU-idle-gh200", NULL, "lowrank", "tokens=1024,in=4096,out=4096,rank=1024" },
	/* nothing of the family anywhere: the default */
	{ "GPU-idle-gh200", NULL, "blockattn_fwd",
	  "seqs=64,lmax=256,heads=4,head_dim=128,block=64,rope=1" },
	/* several models, none named: none */
	{ NULL, NULL, "dense", "tokens=1024,in=4096,out=4096" },
};
#define IDLE_NQ (int)(sizeof(idle_queries) / sizeof(idle_queries[0]))

static struct q idle_query_at(int i)
{
	return idle_queries[i];
}

/* db answers idle query i so. */
static void idle_expect(const char *db, int i, const char *match, int want)
{
	answer_expect(db, idle_queries[i], "idle", i, match, want);
}

static int idle_add(const char *db, const struct fx_dev *d)
{
	struct store *st = NULL;
	struct kt_err err = { 0 };
	int64_t id;
	int rc = -1;

	if (store_open(db, STORE_RW, &st, &err) == 0 &&
	    fx_devices_upsert(st, d, 1, NULL, &id, &err) == 0)
		rc = 0;
	if (rc < 0)
		fprintf(stderr, "idle device %s: %s\n", d->uuid, err.msg);
	store_close(st);
	return rc;
}

static void test_header_untuned(void)
{
	char db[512], dir[512], qfile[512];
	struct qset qs = { db, IDLE_NQ, idle_query_at };
	json_t *doc, *devs;

	snprintf(db, sizeof(db), "%s", kt_test_path("untuned.db"));
	snprintf(dir, sizeof(dir), "%s", kt_test_path("hdr-untuned"));
	snprintf(qfile, sizeof(qfile), "%s", kt_test_path("untuned-queries.txt"));
	CU_ASSERT_EQUAL_FATAL(idle_add(db, &idle_devs[0]), 0);
	CU_ASSERT_EQUAL_FATAL(fx_sib_build(db, &sib_set, FX_SIB_NDEVS), 0);
	CU_ASSERT_EQUAL_FATAL(idle_add(db, &idle_devs[1]), 0);
	/* the database's own answers, which the header must repeat */
	idle_expect(db, 0, "arch", 8);
	idle_expect(db, 1, "exact", 2);
	idle_expect(db, 2, "arch", 7);
	idle_expect(db, 5, "none", -1);
	/* the JSON export lists every device; a device filter, its own */
	doc = export_doc(db, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
	devs = json_object_get(doc, "devices");
	CU_ASSERT_EQUAL(json_array_size(devs), FX_SIB_NDEVS + 2);
	CU_ASSERT_STRING_EQUAL(jstr_or_empty(json_object_get(json_array_get(devs, 0), "uuid")),
			       "GPU-idle-h200");
	json_decref(doc);
	{
		struct export_filter f = { "GPU-idle-gh200", NULL };

		doc = export_doc(db, &f);
		CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
		devs = json_object_get(doc, "devices");
		CU_ASSERT_EQUAL(json_array_size(devs), 1);
		CU_ASSERT_STRING_EQUAL(jstr_or_empty(json_object_get(json_array_get(devs, 0), "uuid")),
				       "GPU-idle-gh200");
		CU_ASSERT_EQUAL(json_array_size(json_object_get(doc, "entries")), 0);
		json_decref(doc);
	}
	write_header(db, STORE_RO, dir);
	header_parity(dir, qfile, &qs);
}

/* ---- launch flags: cooperative, pdl ---- */

#define COOP_SHAPE "tokens=1024,in=4096,out=4096,blocks=16,rank=1024"
#define COOP_CONFIG "variant=fused_ws,BLOCK_M=128,RING=6,EPILOGUE=3,CLUSTER_I=1,CLUSTER_T=1"
#define PDL_CONFIG                                                                      \
	"variant=tcmix_ws,BLOCK_M=128,BLOCK_N=256,Z_BLOCK_N=256,STAGES=4,GROUP_M=8," \
	"CONSUMERS=2,PERSISTENT=3"

/* A database whose one winner is family's config at shape on the
 * fixture's H200: monarch's fused_ws with EPILOGUE 3 (a cooperative launch:
 * its CTAs wait for each other), blast's tcmix_ws (pdl launches). */
static int one_winner_db(const char *path, const char *family, const char *shape,
			 const char *config)
{
	const struct kt_family *f = kt_family_find(family);
	struct store *st = NULL;
	struct store_device d;
	struct store_sweep_spec spec;
	struct store_trial tr;
	struct kt_shape s;
	struct kt_config c;
	struct kt_err err = { 0 };
	int64_t prob, sweep, cfg;
	char *js;
	int resumed, rc = -1;

	memset(&d, 0, sizeof(d));
	snprintf(d.name, sizeof(d.name), "%s", fx_devs[0].name);
	snprintf(d.uuid, sizeof(d.uuid), "%s", fx_devs[0].uuid);
	snprintf(d.arch, sizeof(d.arch), "%s", fx_devs[0].arch);
	d.sms = fx_devs[0].sms;
	d.l2_bytes = fx_devs[0].l2;
	d.smem_optin = fx_devs[0].smem;
	if (!f || kt_shape_parse(f, shape, &s, &err) < 0 ||
	    kt_config_parse(f, config, &c, &err) < 0 ||
	    store_open(path, STORE_RW, &st, &err) < 0 || store_device_upsert(st, &d, &err) < 0)
		goto out;
	js = fx_dump(famjson_shape(f, &s));
	rc = store_problem_intern(st, f->name, shape, js, &prob, &err);
	free(js);
	if (rc < 0)
		goto out;
	rc = -1;
	memset(&spec, 0, sizeof(spec));
	spec.device_id = d.id;
	spec.problem_id = prob;
	spec.strategy = "exhaustive";
	spec.options_key = "coop";
	spec.provenance_json = "{\"template_hash\":\"c00p\"}";
	spec.planned = 1;
	if (store_sweep_begin(st, &spec, &sweep, &resumed, &err) < 0)
		goto out;
	js = fx_dump(famjson_config(f, &c));
	rc = store_config_intern(st, f->name, config, js, &cfg, &err);
	free(js);
	if (rc < 0)
		goto out;
	rc = -1;
	memset(&tr, 0, sizeof(tr));
	tr.sweep_id = sweep;
	tr.config_id = cfg;
	tr.status = "ok";
	tr.median_us = 40;
	tr.min_us = 39;
	tr.p90_us = 41;
	tr.reps = 50;
	tr.rel_err = 0.001;
	if (store_trial_add(st, &tr, &err) < 0 || store_sweep_end(st, sweep, STORE_SWEEP_DONE, &err) < 0)
		goto out;
	rc = 0;
out:
	if (rc < 0)
		fprintf(stderr, "one-winner fixture (%s): %s\n", family, err.msg);
	store_close(st);
	return rc;
}

/* libktune opens db's JSON export and answers its one entry exactly, with
 * nkernels launches per call (offline: planned for the fixture's H200). */
static void runtime_answers(const char *db, const char *family, const char *shape,
			    const char *config, int nkernels)
{
	json_t *doc = export_doc(db, NULL);
	char *text = doc ? json_dumps(doc, 0) : NULL;
	const struct kt_family *f = kt_family_find(family);
	struct kt_config cfg;
	struct kt_err err = { 0 };
	ktune_table *t = NULL;
	ktune_choice c;
	char key[512];

	json_decref(doc);
	CU_ASSERT_PTR_NOT_NULL_FATAL(text);
	CU_ASSERT_EQUAL_FATAL(kt_config_parse(f, config, &cfg, &err), 0);
	kt_config_key(f, &cfg, key, sizeof(key));
	CU_ASSERT_EQUAL_FATAL(ktune_open_json_text(text, (int64_t)strlen(text), &t), KTUNE_OK);
	free(text);
	CU_ASSERT_EQUAL(ktune_set_option(t, "arch", "sm_90a"), KTUNE_OK);
	CU_ASSERT_EQUAL(ktune_set_option(t, "device", fx_devs[0].uuid), KTUNE_OK);
	CU_ASSERT_EQUAL(ktune_choose(t, family, shape, NULL, &c), KTUNE_OK);
	CU_ASSERT_STRING_EQUAL(c.match, "exact");
	CU_ASSERT_STRING_EQUAL(c.config, key);
	CU_ASSERT_EQUAL(c.nkernels, nkernels);
	ktune_close(t);
}

/* The cooperative flag reaches the JSON export (true on the fused launch,
 * false on its prep) and the C header's struct ktune_launch, which a C11
 * program reads back. */
static void test_cooperative(void)
{
	const char *cdb = kt_test_path("coop.db");
	json_t *doc, *e, *l;

	CU_ASSERT_EQUAL_FATAL(one_winner_db(cdb, "monarch", COOP_SHAPE, COOP_CONFIG), 0);
	doc = export_doc(cdb, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
	CU_ASSERT_EQUAL_FATAL(json_array_size(json_object_get(doc, "entries")), 1);
	e = json_array_get(json_object_get(doc, "entries"), 0);
	CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(e, "config_key")), COOP_CONFIG);
	l = json_array_get(json_object_get(json_object_get(e, "launch"), "launches"), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(l);
	CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(l, "kernel")), "fused_monarch_ws");
	CU_ASSERT(json_is_true(json_object_get(l, "cooperative")));
	CU_ASSERT_EQUAL(json_array_size(json_object_get(json_object_get(e, "launch"), "launches")), 1);
	l = json_array_get(json_object_get(json_object_get(e, "launch"), "prep"), 0);
	CU_ASSERT(json_is_false(json_object_get(l, "cooperative")));
	json_decref(doc);

	/* the prep (w1's re-layout) ran at prepare time: one launch a call */
	runtime_answers(cdb, "monarch", COOP_SHAPE, COOP_CONFIG, 1);
}

/* The pdl flag reaches the JSON export (true on tcmix_ws's three kernels,
 * false on its prep) and the C header, read back by a C11 program. */
static void test_pdl(void)
{
	const char *pdb = kt_test_path("pdl.db");
	json_t *doc, *e, *l;
	size_t k;

	CU_ASSERT_EQUAL_FATAL(one_winner_db(pdb, "blast", COOP_SHAPE, PDL_CONFIG), 0);
	doc = export_doc(pdb, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
	CU_ASSERT_EQUAL_FATAL(json_array_size(json_object_get(doc, "entries")), 1);
	e = json_array_get(json_object_get(doc, "entries"), 0);
	CU_ASSERT_EQUAL(json_array_size(json_object_get(json_object_get(e, "launch"), "launches")), 3);
	json_array_foreach(json_object_get(json_object_get(e, "launch"), "launches"), k, l) {
		CU_ASSERT(json_is_true(json_object_get(l, "pdl")));
		CU_ASSERT(json_is_false(json_object_get(l, "cooperative")));
	}
	l = json_array_get(json_object_get(json_object_get(e, "launch"), "prep"), 0);
	CU_ASSERT(json_is_false(json_object_get(l, "pdl")));
	json_decref(doc);

	runtime_answers(pdb, "blast", COOP_SHAPE, PDL_CONFIG, 3);
}

/* ---- the lib bundle ----
 *
 * The whole shipped export (data/h200-results.json) as a bundle: one make
 * builds libktune with the table and every program's cubin (nvcc, for
 * exactly each program's target, all warnings errors), and make check links
 * every program's objects into one binary (no clashing kernel names) and
 * answers every entry exactly from the bundle's own cubins. */
static void test_lib_bundle(void)
{
	const char *dir = kt_test_path("lib"), *db = kt_test_path("shipped.db");
	struct store *st = NULL;
	struct export_bundle b = { 0 };
	struct kt_err err = { 0 };
	char cmd[2048], *out = NULL;
	int i, ncu = 0, nsrc = 0;

	if (access(KT_CUDA_HOME "/bin/nvcc", X_OK) != 0) {
		CU_FAIL("nvcc not found under " KT_CUDA_HOME "/bin (the CUDA toolkit is a build dependency)");
		return;
	}
	CU_ASSERT_EQUAL_FATAL(store_open(db, STORE_RW, &st, &err), 0);
	CU_ASSERT_EQUAL_FATAL(import_json_file(st, "data/h200-results.json", &err), 0);
	CU_ASSERT_EQUAL_FATAL(export_build(st, EXPORT_CUDA, NULL, &b, &err), 0);
	store_close(st);
	for (i = 0; i < b.n; i++) {
		ncu += strncmp(b.files[i].name, "kernels/p", 9) == 0 && strstr(b.files[i].name, ".cu");
		nsrc += strncmp(b.files[i].name, "src/runtime/", 12) == 0;
	}
	CU_ASSERT(ncu >= 11);	/* at least a program per entry, shared ones once */
	CU_ASSERT(nsrc >= 8);	/* libktune's own sources */
	CU_ASSERT_EQUAL_FATAL(export_bundle_write(&b, EXPORT_CUDA, dir, &err), 0);
	export_bundle_release(&b);
	snprintf(cmd, sizeof(cmd), "make -s -C %s -j2 CUDA=%s && make -s -C %s -j2 check CUDA=%s", dir,
		 KT_CUDA_HOME, dir, KT_CUDA_HOME);
	CU_ASSERT_EQUAL(run_cmd(cmd, &out), 0);
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "11 of 11 entries answered from the bundle's cubins"));
	free(out);
	out = NULL;
	/* each program's kernels carry its own prefix */
	snprintf(cmd, sizeof(cmd), "cd %s && nm build/link/p0.o | grep -c ' T ktune_p0_'", dir);
	CU_ASSERT_EQUAL(run_cmd(cmd, &out), 0);
	free(out);
}

/* ---- the CLI: ktune best and ktune export agree with the library ---- */

static void test_cli(void)
{
	char *argv_best[] = { (char *)kt_test_ktune(), "best", "--db", db_path, "--family", "dense",
			      "--device", "GPU-fx-h200", "--shape", "tokens=120,in=4096,out=4096",
			      "--json", NULL };
	char *argv_bad[] = { (char *)kt_test_ktune(), "best", "--db", db_path, "--family", "dense",
			     "--shape", "tokens=oops", NULL };
	char *argv_rule[] = { (char *)kt_test_ktune(), "best", "--db", db_path, "--family", "dense",
			      "--device", "GPU-fx-h200", "--shape", "tokens=120,in=4095,out=4096", NULL };
	char *argv_dflt[] = { (char *)kt_test_ktune(), "best", "--db", db_path, "--family", "dense",
			      "--device", "GPU-fx-h200", "--shape", "tokens=120,in=4096,out=4096",
			      "--max-distance", "0", NULL };
	char *argv_exp[] = { (char *)kt_test_ktune(), "export", "--db", db_path, "--format", "c", NULL };
	char *out = NULL;
	json_t *j;
	int rc;

	if (access(kt_test_ktune(), X_OK) != 0) {
		CU_FAIL("the ktune binary is not built (make build/ktune)");
		return;
	}
	rc = kt_test_exec(argv_best, NULL, &out, 60);
	CU_ASSERT_EQUAL(rc, 0);
	if (rc != 0)
		fprintf(stderr, "ktune best: %s\n", out ? out : "");
	j = out ? json_loads(out, 0, NULL) : NULL;
	CU_ASSERT_PTR_NOT_NULL(j);
	if (j) {
		CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "match")), "nearest");
		CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "config_key")), fx.winner_key[1]);
	}
	json_decref(j);
	free(out);
	out = NULL;
	rc = kt_test_exec(argv_bad, NULL, &out, 60);
	CU_ASSERT_EQUAL(rc, 2);
	free(out);
	out = NULL;
	/* a shape no config can run names the rule it broke; a default
	 * answer says why the default answered */
	rc = kt_test_exec(argv_rule, NULL, &out, 60);
	CU_ASSERT_EQUAL(rc, 2); /* bad input, as a malformed shape */
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "must be multiples of 8"));
	free(out);
	out = NULL;
	rc = kt_test_exec(argv_dflt, NULL, &out, 60);
	CU_ASSERT_EQUAL(rc, 0);
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, ": default\n"));
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "  why      the nearest tuned shape"));
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "past max_distance 0"));
	free(out);
	out = NULL;
	rc = kt_test_exec(argv_exp, NULL, &out, 60);
	CU_ASSERT_EQUAL(rc, 0);
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "KTUNE_BUILTIN_VERSION, 3, ktune_tuned_devices, 8, ktune_tuned_entries, 0, 0"));
	free(out);
}

/* ktune import: needs the database's token file to be ours (0600), loads
 * an export, and a second run adds nothing. */
static void test_cli_import(void)
{
	const char *json_path = kt_test_path("cli-export.json");
	const char *db = kt_test_path("cli-import.db");
	char *argv_exp[] = { (char *)kt_test_ktune(), "export", "--db", db_path, "--out",
			     (char *)json_path, NULL };
	char *argv_imp[] = { (char *)kt_test_ktune(), "import", (char *)json_path, "--db",
			     (char *)db, "--json", NULL };
	char *out = NULL, tok[700];
	json_t *j;
	int round;

	if (access(kt_test_ktune(), X_OK) != 0) {
		CU_FAIL("the ktune binary is not built (make build/ktune)");
		return;
	}
	CU_ASSERT_EQUAL_FATAL(kt_test_exec(argv_exp, NULL, &out, 60), 0);
	free(out);
	for (round = 0; round < 2; round++) {
		out = NULL;
		CU_ASSERT_EQUAL(kt_test_exec(argv_imp, NULL, &out, 60), 0);
		j = out ? json_loads(out, 0, NULL) : NULL;
		CU_ASSERT_PTR_NOT_NULL(j);
		if (!j)
			fprintf(stderr, "ktune import: %s\n", out ? out : "");
		CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "added")), round ? 0 : FX_NPROBLEMS);
		CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "skipped")), round ? FX_NPROBLEMS : 0);
		json_decref(j);
		free(out);
	}
	/* a token readable by others: refused, nothing written */
	snprintf(tok, sizeof(tok), "%s.token", db);
	CU_ASSERT_EQUAL(chmod(tok, 0644), 0);
	out = NULL;
	CU_ASSERT_EQUAL(kt_test_exec(argv_imp, NULL, &out, 60), 1);
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "unauthorized"));
	free(out);
}

int main(void)
{
	CU_pSuite s;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("export", suite_init, suite_clean);
	CU_add_test(s, "json: every entry carries its plan, provenance, baselines", test_json_plans);
	CU_add_test(s, "import: round trip, idempotent, bad input writes nothing", test_import_roundtrip);
	CU_add_test(s, "c: header and libktune build as C11 and C++, answer as the database",
		    test_header);
	CU_add_test(s, "c: header answers as the database with several GPUs of one model",
		    test_header_same_model);
	CU_add_test(s, "c: header answers as the database for devices with nothing tuned",
		    test_header_untuned);
	CU_add_test(s, "c: an empty export compiles", test_header_empty);
	CU_add_test(s, "json carries a cooperative launch, libktune runs it", test_cooperative);
	CU_add_test(s, "json carries pdl launches, libktune runs them", test_pdl);
	CU_add_test(s, "lib: the shipped export builds, links and answers from its cubins",
		    test_lib_bundle);
	CU_add_test(s, "cli: best and export", test_cli);
	CU_add_test(s, "cli: import, idempotent, guarded by the token file", test_cli_import);
	return kt_test_main();
}
