#include "export.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "../kernels/family.h"
#include "../templates/templates.h"
#include "launch.h"
#include "lookup.h"

#ifndef KTUNE_VERSION
#define KTUNE_VERSION "unknown"
#endif

int export_format_parse(const char *name, enum export_format *out)
{
	if (!name)
		return -1;
	if (strcmp(name, "json") == 0)
		*out = EXPORT_JSON;
	else if (strcmp(name, "c") == 0)
		*out = EXPORT_C;
	else if (strcmp(name, "cuda") == 0)
		*out = EXPORT_CUDA;
	else
		return -1;
	return 0;
}

void export_bundle_release(struct export_bundle *b)
{
	int i;

	for (i = 0; i < b->n; i++)
		free(b->files[i].data);
	free(b->files);
	b->files = NULL;
	b->n = 0;
}

/* ---- a growable text buffer for the generated sources ---- */

struct sbuf {
	char *s;
	size_t len, cap;
	int oom;
};

__attribute__((format(printf, 2, 3)))
static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->oom)
		return;
	for (;;) {
		size_t room = b->cap - b->len;

		va_start(ap, fmt);
		n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? room : 0, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->oom = 1;
			return;
		}
		if (b->s && (size_t)n < room) {
			b->len += n;
			return;
		}
		{
			size_t cap = b->cap ? b->cap : 4096;
			char *ns;

			while (cap < b->len + n + 1)
				cap *= 2;
			if (!(ns = realloc(b->s, cap))) {
				b->oom = 1;
				return;
			}
			b->s = ns;
			b->cap = cap;
		}
	}
}

/* A C string literal of text (escaped). */
static void sb_cstr(struct sbuf *b, const char *text)
{
	const unsigned char *p = (const unsigned char *)(text ? text : "");

	if (!text) {
		sb_printf(b, "0");
		return;
	}
	sb_printf(b, "\"");
	for (; *p; p++) {
		if (*p == '"' || *p == '\\')
			sb_printf(b, "\\%c", *p);
		else if (*p < 0x20 || *p >= 0x7f)
			sb_printf(b, "\\%03o", *p);
		else
			sb_printf(b, "%c", *p);
	}
	sb_printf(b, "\"");
}

static int bundle_add(struct export_bundle *b, const char *name, struct sbuf *sb,
		      struct kt_err *err)
{
	struct export_file *nf;

	if (sb->oom)
		return kt_err_set(err, KT_EINTERNAL, "out of memory writing %s", name);
	if (!(nf = realloc(b->files, (b->n + 1) * sizeof(*nf))))
		return kt_err_set(err, KT_EINTERNAL, "out of memory");
	b->files = nf;
	snprintf(nf[b->n].name, sizeof(nf[b->n].name), "%s", name);
	nf[b->n].data = sb->s ? sb->s : strdup("");
	nf[b->n].len = sb->len;
	sb->s = NULL;
	sb->len = sb->cap = 0;
	if (!nf[b->n].data)
		return kt_err_set(err, KT_EINTERNAL, "out of memory");
	b->n++;
	return 0;
}

/* ---- JSON ---- */

static json_t *family_json(const struct kt_family *f)
{
	json_t *dims = json_array(), *vars = json_array(), *params = json_array();
	int i;

	for (i = 0; i < f->ndims; i++)
		json_array_append_new(dims, json_pack("{s:s,s:b}", "name", f->dims[i].name,
			"structural", f->dims[i].structural));
	for (i = 0; i < f->nvariants; i++)
		json_array_append_new(vars, json_string(f->variants[i]));
	for (i = 0; i < f->nparams; i++)
		json_array_append_new(params, json_string(f->params[i].name));
	return json_pack("{s:s,s:o,s:o,s:o}", "name", f->name, "dims", dims, "variants", vars,
			 "params", params);
}

static json_t *opt_real(double v)
{
	return v > 0 ? json_real(v) : json_null();
}

/* The sweep and its winning trial, as the importer needs them. */
static int entry_sweep(struct store *st, const struct store_winner *w, json_t *e,
		       struct kt_err *err)
{
	struct store_sweep sw;
	struct store_trial_row *rows = NULL;
	json_t *prov;
	int n = 0, i, rc = -1;

	memset(&sw, 0, sizeof(sw));
	if (store_sweep_get(st, w->sweep_id, &sw, err) < 0)
		return -1;
	prov = sw.provenance_json ? json_loads(sw.provenance_json, 0, NULL) : NULL;
	json_object_set_new(e, "sweep", json_pack("{s:I,s:s,s:s,s:s,s:I,s:I,s:f,s:o,s:o}",
		"id", (json_int_t)sw.id, "strategy", sw.strategy,
		"options_key", sw.options_key ? sw.options_key : "",
		"status", store_sweep_status_name(sw.status), "planned", (json_int_t)sw.planned,
		"done", (json_int_t)sw.done, "started", sw.started, "finished", opt_real(sw.finished),
		"provenance", prov ? prov : json_object()));
	/* The winner is the fastest ok trial of its sweep: among the first. */
	if (store_trials_list(st, w->sweep_id, 8, &rows, &n, err) < 0)
		goto out;
	for (i = 0; i < n; i++)
		if (strcmp(rows[i].config_key, w->config_key) == 0) {
			json_object_set_new(e, "trial", json_pack("{s:s,s:f,s:f,s:f,s:f,s:i,s:f,s:f}",
				"status", rows[i].status, "median_us", rows[i].median_us,
				"min_us", rows[i].min_us, "p90_us", rows[i].p90_us,
				"spread", rows[i].spread, "reps", rows[i].reps,
				"rel_err", rows[i].rel_err, "compile_ms", rows[i].compile_ms));
			break;
		}
	if (i == n)
		json_object_set_new(e, "trial", json_pack("{s:s,s:f,s:f,s:f,s:f,s:i,s:f,s:f}",
			"status", "ok", "median_us", w->median_us, "min_us", w->min_us,
			"p90_us", w->p90_us, "spread", 0.0, "reps", 0, "rel_err", -1.0,
			"compile_ms", 0.0));
	rc = 0;
out:
	for (i = 0; i < n; i++)
		store_trial_row_release(&rows[i]);
	free(rows);
	store_sweep_release(&sw);
	return rc;
}

/* Whether the export's device filter selects d, as the store's winners
 * query does (uuid, name, or all digits: the id; no filter: every device),
 * so that every winner's device is among those selected. */
static int filter_device(const struct export_filter *f, const struct store_device *d)
{
	const char *v = f ? f->device : NULL;

	if (!v)
		return 1;
	if (strcmp(v, d->uuid) == 0 || strcmp(v, d->name) == 0)
		return 1;
	if (!*v || strspn(v, "0123456789") != strlen(v))
		return 0;
	errno = 0;
	return strtoll(v, NULL, 10) == (long long)d->id && errno == 0;
}

int export_json(struct store *st, const struct export_filter *f, json_t **out,
		struct kt_err *err)
{
	struct store_device *devs = NULL;
	struct store_winner *w = NULL;
	json_t *doc = NULL, *jdevs, *jfams, *entries, *skipped;
	int ndev = 0, n = 0, i, k, rc = -1;
	char stamp[32];
	time_t now = time(NULL);
	struct tm tm;

	*out = NULL;
	if (store_devices_list(st, &devs, &ndev, err) < 0 ||
	    store_winners_list(st, f ? f->device : NULL, NULL, f ? f->family : NULL, &w, &n, err) < 0)
		goto out;
	gmtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", &tm);
	jdevs = json_array();
	jfams = json_array();
	entries = json_array();
	skipped = json_array();
	doc = json_pack("{s:s,s:i,s:s,s:s,s:o,s:o,s:o,s:o}", "format", EXPORT_FORMAT_NAME,
			"version", EXPORT_FORMAT_VERSION, "ktune_version", KTUNE_VERSION,
			"generated", stamp, "devices", jdevs, "families", jfams, "entries", entries,
			"skipped", skipped);
	if (!doc) {
		kt_err_set(err, KT_EINTERNAL, "out of memory");
		goto out;
	}
	/* Every device the filter selects, tuned or not, so that the header
	 * resolves a device name as lookup_best() does over the store: a
	 * named device with nothing tuned falls back to its arch and the
	 * default instead of being unknown, and a name it shares with tuned
	 * GPUs still makes a device ambiguous. Likewise every family the
	 * filter selects: one with nothing tuned answers the default. The
	 * winners passed the same filter, so their devices and families are
	 * among these. */
	for (k = 0; k < ndev; k++)
		if (filter_device(f, &devs[k]))
			json_array_append_new(jdevs, lookup_device_json(&devs[k]));
	for (k = 0; k < kt_family_count(); k++) {
		const struct kt_family *fam = kt_family_at(k);

		if (!f || !f->family || strcmp(f->family, fam->name) == 0)
			json_array_append_new(jfams, family_json(fam));
	}
	for (i = 0; i < n; i++) {
		const struct kt_family *fam = kt_family_find(w[i].family);
		const struct store_device *d = NULL;
		struct kt_shape shape;
		struct kt_config cfg;
		struct kt_target tgt;
		struct kt_err perr = { 0 };
		json_t *e, *params, *plan;

		for (k = 0; k < ndev; k++)
			if (devs[k].id == w[i].device_id)
				d = &devs[k];
		/* A winner of a family or key this binary does not know (a
		 * newer database) cannot be looked up or planned: it is left
		 * out, and the document says so. */
		if (!fam || !d || kt_shape_parse(fam, w[i].shape_key, &shape, &perr) < 0 ||
		    kt_config_parse(fam, w[i].config_key, &cfg, &perr) < 0 ||
		    lookup_device_target(d->arch, d, &tgt, &perr) < 0) {
			json_array_append_new(skipped, json_pack("{s:s,s:s,s:s,s:s}", "family", w[i].family,
				"shape_key", w[i].shape_key, "config_key", w[i].config_key,
				"reason", perr.msg[0] ? perr.msg : "unknown family or device"));
			continue;
		}
		/* A plan that fails (the family changed its constraints since
		 * the sweep) keeps the measured entry, without launch data. */
		if (!(plan = launch_plan_json(fam, &shape, &cfg, &tgt, &perr)))
			plan = json_null();
		params = w[i].params_json ? json_loads(w[i].params_json, 0, NULL) : NULL;
		e = json_pack("{s:s,s:s,s:s,s:s,s:o,s:s,s:o,s:o,s:f,s:f,s:f,s:o,s:f,"
			      "s:{s:o,s:o},s:o}",
			"device", d->uuid, "arch", d->arch, "family", fam->name,
			"shape_key", w[i].shape_key, "shape", lookup_shape_json(fam, &shape),
			"config_key", w[i].config_key, "config", lookup_config_json(fam, &cfg),
			"params", params ? params : lookup_config_json(fam, &cfg),
			"median_us", w[i].median_us, "min_us", w[i].min_us, "p90_us", w[i].p90_us,
			"retime_us", opt_real(w[i].retime_us),
			"floor_us", lookup_floor_us(fam, &shape),
			"baselines", "cublas_dense", opt_real(w[i].cublas_us),
			"naive", opt_real(w[i].naive_us),
			"launch", plan);
		if (!e || json_array_append_new(entries, e) < 0) {
			kt_err_set(err, KT_EINTERNAL, "out of memory");
			goto out;
		}
		if (json_is_null(plan))
			json_object_set_new(e, "launch_error", json_string(perr.msg));
		if (entry_sweep(st, &w[i], e, err) < 0)
			goto out;
	}
	*out = doc;
	doc = NULL;
	rc = 0;
out:
	json_decref(doc);
	for (i = 0; i < n; i++)
		store_winner_release(&w[i]);
	free(w);
	free(devs);
	return rc;
}

/* ---- C header ---- */

static const char header_prologue[] =
"/*\n"
" * ktune_tuned.h -- tuned kernel configs exported by ktune (format c).\n"
" * Self-contained: C11 or C++, no other header of ktune needed.\n"
" *\n"
" * ktune_best() repeats ktune's lookup chain (ktune best, GET /v1/best),\n"
" * first that answers wins:\n"
" *   KTUNE_MATCH_EXACT    the shape tuned on the device; else tuned on\n"
" *                        another GPU of the same model (same name, compared\n"
" *                        case-insensitively, and same arch: the other GPUs\n"
" *                        of a multi-GPU host), the fastest of those;\n"
" *                        e->device says which GPU it was measured on;\n"
" *   KTUNE_MATCH_NEAREST  the nearest shape tuned on the device alone, not\n"
" *                        its siblings (same structural dims, closest in\n"
" *                        log-distance over the others, within\n"
" *                        KTUNE_MAX_DISTANCE, and accepted by `valid` --\n"
" *                        pass a predicate that applies your family's\n"
" *                        constraints, or NULL to accept all);\n"
" *   KTUNE_MATCH_ARCH     exact, else nearest, on the other devices of the\n"
" *                        architecture, siblings included;\n"
" *   KTUNE_MATCH_DEFAULT  NULL: use the family's default config (ktune best\n"
" *                        --json gives it per shape).\n"
" *\n"
" * KTUNE_MAX_DISTANCE (define it before including this header to change\n"
" * it; 0: exact or default only) is ktune best's default limit, ln 8: a\n"
" * shape further than a factor of 8 in one dim from every tuned one gets\n"
" * the default, whose rules fit its regime better than a far neighbour.\n"
" *\n"
" * Every entry carries how to launch it for its tuned shape: programs (the\n"
" * template, compile defines and options), buffers, untimed prep launches\n"
" * (offline transforms) and the timed launches in order, each with kernel\n"
" * name, grid, block, dynamic shared memory, the cooperative flag and\n"
" * arguments. A launch with cooperative = 1 has CTAs that wait for each\n"
" * other: launch it with cuLaunchCooperativeKernel (or cuLaunchKernelEx\n"
" * with CU_LAUNCH_ATTRIBUTE_COOPERATIVE), which refuses a grid that cannot\n"
" * be resident at once; an ordinary launch may hang. Its scratch buffers\n"
" * must be zeroed once before the first launch. A launch with pdl = 1\n"
" * may go out with programmatic dependent launch (cuLaunchKernelEx with\n"
" * CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION): it starts while\n"
" * the previous kernel finishes and waits for it itself, so it is correct\n"
" * either way; it was timed so. In a `cuda`\n"
" * export, programs[i].source is the specialized .cu file and\n"
" * launches[i].symbol the kernel's name in it.\n"
" * An entry's launches (grids, buffer sizes, arguments) are those of its\n"
" * tuned shape, e->shape. For any other shape (an answer other than\n"
" * KTUNE_MATCH_EXACT) take the config from here and the launches from\n"
" * `ktune best --json` or GET /v1/best of that shape, whose \"launch\" is\n"
" * planned for the shape asked.\n"
" */\n"
"#ifndef KTUNE_TUNED_H\n"
"#define KTUNE_TUNED_H\n\n"
"#include <math.h>\n"
"#include <stddef.h>\n"
"#include <string.h>\n\n"
"#define KTUNE_MAX_DIMS 8\n\n"
"enum ktune_match {\n"
"\tKTUNE_MATCH_EXACT = 0,\n"
"\tKTUNE_MATCH_NEAREST = 1,\n"
"\tKTUNE_MATCH_ARCH = 2,\n"
"\tKTUNE_MATCH_DEFAULT = 3,\n"
"\tKTUNE_MATCH_NONE = 4\t/* unknown device or family, or device ambiguous */\n"
"};\n\n"
"/* KTUNE_ARG_TMAP: a TMA tensor map (CUtensorMap, 128 bytes by value) over\n"
" * buffer `buf`, to be built by the caller with cuTensorMapEncodeTiled; its\n"
" * geometry is in the comment beside the argument. */\n"
"enum ktune_arg_kind { KTUNE_ARG_BUF = 0, KTUNE_ARG_I32, KTUNE_ARG_I64, KTUNE_ARG_F32,\n"
"\tKTUNE_ARG_TMAP };\n\n"
"struct ktune_arg {\n\tint kind;\t/* enum ktune_arg_kind */\n\tint buf;\t/* KTUNE_ARG_BUF: index into buffers */\n"
"\tlong long i;\n\tfloat f;\n};\n\n"
"struct ktune_launch {\n\tconst char *kernel;\t/* extern \"C\" name in the template */\n"
"\tconst char *symbol;\t/* its name in the cuda export's .cu */\n\tint program;\n"
"\tunsigned grid[3], block[3];\n\tunsigned smem;\t/* dynamic shared memory, bytes */\n"
"\tint cooperative;\t/* 1: cuLaunchCooperativeKernel (its CTAs wait for each other) */\n"
"\tint pdl;\t/* 1: may use programmatic dependent launch (a speed hint) */\n"
"\tint nargs;\n\tconst struct ktune_arg *args;\n};\n\n"
"struct ktune_program {\n\tconst char *tpl;\t/* template name */\n\tconst char *source;\t/* .cu in a cuda export */\n"
"\tconst char *arch;\t/* --gpu-architecture */\n\tint ndefines;\n\tconst char *const *defines;\t/* NAME=VALUE, give as -D */\n};\n\n"
"struct ktune_buffer {\n\tconst char *name;\n\tconst char *role;\t/* input, output, scratch */\n"
"\tconst char *dtype;\t/* bf16, f32, i32 */\n\tunsigned long long elems;\n};\n\n"
"struct ktune_device {\n\tconst char *name, *uuid, *arch;\n\tint sms, smem_optin;\t/* what a validity predicate may need */\n\tlong long l2_bytes;\n};\n\n"
"struct ktune_family {\n\tconst char *name;\n\tint ndims;\n\tconst char *const *dims;\n\tconst int *structural;\n};\n\n"
"struct ktune_entry {\n\tint device;\t/* index into ktune_devices */\n\tint family;\t/* index into ktune_families */\n"
"\tlong shape[KTUNE_MAX_DIMS];\t/* in the family's dims order */\n"
"\tconst char *shape_key, *config_key, *variant;\n"
"\tint nparams;\n\tconst char *const *param_names;\n\tconst long *param_values;\n"
"\tdouble median_us, floor_us, cublas_us, naive_us;\t/* 0: not measured */\n"
"\tlong long sweep_id;\t/* in the exporting database */\n"
"\tint nprograms;\n\tconst struct ktune_program *programs;\n"
"\tint nbuffers;\n\tconst struct ktune_buffer *buffers;\n"
"\tint nprep;\n\tconst struct ktune_launch *prep;\n"
"\tint nlaunch;\n\tconst struct ktune_launch *launches;\n"
"\tconst char *transform;\t/* offline weight transform, \"\" if none */\n};\n\n"
"/* 0 rejects entry e for shape (your family's constraints). */\n"
"typedef int (*ktune_valid_fn)(const struct ktune_entry *e, const long *shape, void *ctx);\n\n";

/* ktune_best() is lookup_best() (server/lookup.c) step for step; a change
 * to one is a change to the other, and test_export compares their answers.
 * The header knows the devices and families the export selected (the
 * JSON export's "devices" and "families": without a filter all of the
 * store's devices and all of the binary's families, tuned or not), so a
 * name resolves to the same device, ambiguity or default as over the
 * store. */
static const char header_lookup[] =
"\nstatic inline int ktune_streq_nocase(const char *a, const char *b)\n{\n"
"\tfor (; *a && *b; a++, b++) {\n"
"\t\tint x = (*a >= 'A' && *a <= 'Z') ? *a + 32 : *a;\n"
"\t\tint y = (*b >= 'A' && *b <= 'Z') ? *b + 32 : *b;\n\n"
"\t\tif (x != y)\n\t\t\treturn 0;\n\t}\n\treturn *a == *b;\n}\n\n"
"/* -1 when a structural dim differs; else the log-distance. */\n"
"static inline double ktune_distance(const struct ktune_family *f, const long *a, const long *b)\n{\n"
"\tdouble d = 0;\n\tint i;\n\n"
"\tfor (i = 0; i < f->ndims; i++) {\n\t\tdouble x, y;\n\n"
"\t\tif (f->structural[i]) {\n\t\t\tif (a[i] != b[i])\n\t\t\t\treturn -1;\n\t\t\tcontinue;\n\t\t}\n"
"\t\tx = log((double)(a[i] > 0 ? a[i] : 1));\n"
"\t\ty = log((double)(b[i] > 0 ? b[i] : 1));\n"
"\t\td += (x - y) * (x - y);\n\t}\n\treturn sqrt(d);\n}\n\n"
"/* Which entries a step looks at. A model is a GPU name and an arch: its\n"
" * GPUs are interchangeable for an exact shape, not for a nearest one. */\n"
"enum ktune_stage {\n"
"\tKTUNE_STAGE_DEVICE = 0,\t/* the asked device */\n"
"\tKTUNE_STAGE_MODEL = 1,\t/* the other devices of its name and arch */\n"
"\tKTUNE_STAGE_ARCH = 2\t/* every device of the arch but the asked one (dev may be -1) */\n"
"};\n\n"
"static inline int ktune_in_stage(const struct ktune_entry *e, int dev, int stage,\n"
"\t\t\t\t const char *arch)\n{\n"
"\tconst struct ktune_device *d = &ktune_devices[e->device];\n\n"
"\tif (stage == KTUNE_STAGE_DEVICE)\n\t\treturn e->device == dev;\n"
"\tif (e->device == dev || strcmp(d->arch, arch) != 0)\n\t\treturn 0;\n"
"\treturn stage == KTUNE_STAGE_ARCH || ktune_streq_nocase(d->name, ktune_devices[dev].name);\n}\n\n"
"/* The exact shape within a stage; among several (only across devices)\n"
" * the fastest, the first in table order on a tie. */\n"
"static inline const struct ktune_entry *ktune_search_exact(int fam, const long *shape, int dev,\n"
"\t\tint stage, const char *arch)\n{\n"
"\tconst struct ktune_family *f = &ktune_families[fam];\n"
"\tconst struct ktune_entry *best = NULL;\n\tint i;\n\n"
"\tfor (i = 0; i < KTUNE_NENTRIES; i++) {\n"
"\t\tconst struct ktune_entry *e = &ktune_entries[i];\n\n"
"\t\tif (e->family != fam || !ktune_in_stage(e, dev, stage, arch) ||\n"
"\t\t    memcmp(e->shape, shape, sizeof(long) * (size_t)f->ndims) != 0)\n\t\t\tcontinue;\n"
"\t\tif (!best || e->median_us < best->median_us)\n\t\t\tbest = e;\n\t}\n"
"\treturn best;\n}\n\n"
"/* The closest valid shape within a stage, the first in table order on a\n"
" * tie; *dist its log-distance. */\n"
"static inline const struct ktune_entry *ktune_search_nearest(int fam, const long *shape, int dev,\n"
"\t\tint stage, const char *arch, ktune_valid_fn valid, void *ctx, double *dist)\n{\n"
"\tconst struct ktune_family *f = &ktune_families[fam];\n"
"\tconst struct ktune_entry *best = NULL;\n\tdouble bd = 0;\n\tint i;\n\n"
"\tfor (i = 0; i < KTUNE_NENTRIES; i++) {\n"
"\t\tconst struct ktune_entry *e = &ktune_entries[i];\n\t\tdouble d;\n\n"
"\t\tif (e->family != fam || !ktune_in_stage(e, dev, stage, arch))\n\t\t\tcontinue;\n"
"\t\tif ((d = ktune_distance(f, e->shape, shape)) < 0 ||\n"
"\t\t    !(d <= (double)KTUNE_MAX_DISTANCE * (1 + 1e-12)))\n\t\t\tcontinue;\n"
"\t\tif (best && d >= bd)\n\t\t\tcontinue;\n"
"\t\tif (valid && !valid(e, shape, ctx))\n\t\t\tcontinue;\n"
"\t\tbest = e;\n\t\tbd = d;\n\t}\n\t*dist = bd;\n\treturn best;\n}\n\n"
"/* The best entry for family at shape (dims in the family's order) on\n"
" * device (uuid or name, the first that matches; NULL: the only device, or\n"
" * the first when all share one name) or, when the device is unknown, arch\n"
" * (\"sm_90\"; may be NULL). *match says which step answered; NULL with\n"
" * KTUNE_MATCH_DEFAULT means: use the family default. */\n"
"static inline const struct ktune_entry *ktune_best(const char *device, const char *arch,\n"
"\t\tconst char *family, const long *shape, ktune_valid_fn valid, void *ctx,\n"
"\t\tint *match, double *distance)\n{\n"
"\tconst struct ktune_entry *e;\n\tint fam = -1, dev = -1, i;\n\tdouble dist = 0;\n\n"
"\t*match = KTUNE_MATCH_NONE;\n\tif (distance)\n\t\t*distance = 0;\n"
"\tfor (i = 0; i < KTUNE_NFAMILIES; i++)\n"
"\t\tif (strcmp(ktune_families[i].name, family) == 0)\n\t\t\tfam = i;\n"
"\tif (fam < 0)\n\t\treturn NULL;\n"
"\tif (device && *device) {\n"
"\t\tfor (i = 0; i < KTUNE_NDEVICES && dev < 0; i++)\n"
"\t\t\tif (strcmp(ktune_devices[i].uuid, device) == 0 ||\n"
"\t\t\t    ktune_streq_nocase(ktune_devices[i].name, device))\n\t\t\t\tdev = i;\n"
"\t\tif (dev < 0 && !(arch && *arch))\n\t\t\treturn NULL;\n"
"\t} else if (!(arch && *arch)) {\n"
"\t\t/* several GPUs of one name (a multi-GPU host) need no naming */\n"
"\t\tfor (i = 1; i < KTUNE_NDEVICES; i++)\n"
"\t\t\tif (!ktune_streq_nocase(ktune_devices[i].name, ktune_devices[0].name))\n"
"\t\t\t\treturn NULL;\n"
"\t\tif (KTUNE_NDEVICES > 0)\n\t\t\tdev = 0;\n\t}\n"
"\tif (dev >= 0)\n\t\tarch = ktune_devices[dev].arch;\n"
"\tif (!arch)\n\t\tarch = \"sm_90\";\n"
"\t/* exact on the device, then on its siblings; nearest on the device */\n"
"\tif (dev >= 0 && ((e = ktune_search_exact(fam, shape, dev, KTUNE_STAGE_DEVICE, arch)) ||\n"
"\t\t\t (e = ktune_search_exact(fam, shape, dev, KTUNE_STAGE_MODEL, arch)))) {\n"
"\t\t*match = KTUNE_MATCH_EXACT;\n"
"\t} else if (dev >= 0 && (e = ktune_search_nearest(fam, shape, dev, KTUNE_STAGE_DEVICE, arch,\n"
"\t\t\t\t\t\t\t  valid, ctx, &dist))) {\n"
"\t\t*match = KTUNE_MATCH_NEAREST;\n"
"\t} else if ((e = ktune_search_exact(fam, shape, dev, KTUNE_STAGE_ARCH, arch)) ||\n"
"\t\t   (e = ktune_search_nearest(fam, shape, dev, KTUNE_STAGE_ARCH, arch, valid, ctx, &dist))) {\n"
"\t\t*match = KTUNE_MATCH_ARCH;\n"
"\t} else {\n\t\t*match = KTUNE_MATCH_DEFAULT;\n\t\treturn NULL;\n\t}\n"
"\tif (distance)\n\t\t*distance = dist;\n\treturn e;\n}\n\n"
"#endif\n";

static double jreal(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);

	return json_is_number(v) ? json_number_value(v) : 0;
}

static void emit_launches(struct sbuf *b, int ei, const char *what, json_t *arr,
			  json_t *bufs)
{
	size_t li, ai;
	json_t *l, *a;

	json_array_foreach(arr, li, l) {
		json_t *args = json_object_get(l, "args");

		if (json_array_size(args) == 0)
			continue;
		sb_printf(b, "static const struct ktune_arg ktune_e%d_%s%zu_args[] = {\n", ei, what, li);
		json_array_foreach(args, ai, a) {
			json_t *v;

			if ((v = json_object_get(a, "index")))
				sb_printf(b, "\t{ KTUNE_ARG_BUF, %d, 0, 0.0f },\n", (int)json_integer_value(v));
			else if ((v = json_object_get(a, "i32")))
				sb_printf(b, "\t{ KTUNE_ARG_I32, -1, %lldLL, 0.0f },\n",
					  (long long)json_integer_value(v));
			else if ((v = json_object_get(a, "i64")))
				sb_printf(b, "\t{ KTUNE_ARG_I64, -1, %lldLL, 0.0f },\n",
					  (long long)json_integer_value(v));
			else if ((v = json_object_get(a, "f32")))
				sb_printf(b, "\t{ KTUNE_ARG_F32, -1, 0, %.9gf },\n", json_number_value(v));
			else if ((v = json_object_get(a, "tmap"))) {
				json_t *dims = json_object_get(v, "dims"), *box = json_object_get(v, "box");
				size_t k;

				/* One line per argument, so that nargs stays true. */
				sb_printf(b, "\t{ KTUNE_ARG_TMAP, %d, 0, 0.0f },\t/* tensor map: dims",
					  (int)json_integer_value(json_object_get(v, "buf_index")));
				for (k = 0; k < json_array_size(dims); k++)
					sb_printf(b, " %lld", (long long)json_integer_value(json_array_get(dims, k)));
				sb_printf(b, ", box");
				for (k = 0; k < json_array_size(box); k++)
					sb_printf(b, " %lld", (long long)json_integer_value(json_array_get(box, k)));
				sb_printf(b, ", swizzle %lld */\n",
					  (long long)json_integer_value(json_object_get(v, "swizzle")));
			} else {
				sb_printf(b, "#error \"ktune export: an argument of unknown kind\"\n");
			}
		}
		sb_printf(b, "};\n");
	}
	(void)bufs;
	if (json_array_size(arr) == 0)
		return;
	sb_printf(b, "static const struct ktune_launch ktune_e%d_%s[] = {\n", ei, what);
	json_array_foreach(arr, li, l) {
		json_t *g = json_object_get(l, "grid"), *bl = json_object_get(l, "block");
		const char *k = json_string_value(json_object_get(l, "kernel"));

		sb_printf(b, "\t{ ");
		sb_cstr(b, k);
		sb_printf(b, ", \"ktune_e%d_%s\", %d, { %lldu, %lldu, %lldu }, { %lldu, %lldu, %lldu }, %lldu, %d, %d, %zu, ",
			  ei, k ? k : "", (int)json_integer_value(json_object_get(l, "program")),
			  (long long)json_integer_value(json_array_get(g, 0)),
			  (long long)json_integer_value(json_array_get(g, 1)),
			  (long long)json_integer_value(json_array_get(g, 2)),
			  (long long)json_integer_value(json_array_get(bl, 0)),
			  (long long)json_integer_value(json_array_get(bl, 1)),
			  (long long)json_integer_value(json_array_get(bl, 2)),
			  (long long)json_integer_value(json_object_get(l, "smem")),
			  json_is_true(json_object_get(l, "cooperative")),
			  json_is_true(json_object_get(l, "pdl")),
			  json_array_size(json_object_get(l, "args")));
		if (json_array_size(json_object_get(l, "args")))
			sb_printf(b, "ktune_e%d_%s%zu_args },\n", ei, what, li);
		else
			sb_printf(b, "NULL },\n");
	}
	sb_printf(b, "};\n");
}

static const char *jstr(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));

	return s ? s : "";
}

static int index_of(json_t *arr, const char *field, const char *value)
{
	size_t i;
	json_t *v;

	json_array_foreach(arr, i, v)
		if (strcmp(jstr(v, field), value) == 0)
			return (int)i;
	return -1;
}

/* The header, written from the JSON export so both carry the same data. */
static int header_from_json(json_t *doc, int cuda, struct sbuf *b, struct kt_err *err)
{
	json_t *devs = json_object_get(doc, "devices"), *fams = json_object_get(doc, "families");
	json_t *entries = json_object_get(doc, "entries"), *v, *e;
	size_t i, k;

	sb_printf(b, "%s", header_prologue);
	/* lookup_within()'s limit and slack, so that both answer alike */
	sb_printf(b, "#ifndef KTUNE_MAX_DISTANCE\n#define KTUNE_MAX_DISTANCE %.17g\t/* ln 8 */\n#endif\n\n",
		  LOOKUP_MAX_DISTANCE);
	sb_printf(b, "/* exported %s by ktune %s */\n\n",
		  json_string_value(json_object_get(doc, "generated")),
		  json_string_value(json_object_get(doc, "ktune_version")));
	sb_printf(b, "#define KTUNE_NDEVICES %zu\n#define KTUNE_NFAMILIES %zu\n#define KTUNE_NENTRIES %zu\n\n",
		  json_array_size(devs), json_array_size(fams), json_array_size(entries));
	/* Zero-length arrays are not C: a placeholder row keeps an empty
	 * export compiling; the counts above say what is real. */
	sb_printf(b, "static const struct ktune_device ktune_devices[] = {\n");
	json_array_foreach(devs, i, v) {
		sb_printf(b, "\t{ ");
		sb_cstr(b, json_string_value(json_object_get(v, "name")));
		sb_printf(b, ", ");
		sb_cstr(b, json_string_value(json_object_get(v, "uuid")));
		sb_printf(b, ", ");
		sb_cstr(b, json_string_value(json_object_get(v, "arch")));
		sb_printf(b, ", %d, %d, %lldLL },\n", (int)json_integer_value(json_object_get(v, "sms")),
			  (int)json_integer_value(json_object_get(v, "smem_optin")),
			  (long long)json_integer_value(json_object_get(v, "l2_bytes")));
	}
	if (!json_array_size(devs))
		sb_printf(b, "\t{ \"\", \"\", \"\", 0, 0, 0 },\n");
	sb_printf(b, "};\n\n");
	json_array_foreach(fams, i, v) {
		json_t *dims = json_object_get(v, "dims"), *d;

		sb_printf(b, "static const char *const ktune_f%zu_dims[] = {", i);
		json_array_foreach(dims, k, d) {
			sb_printf(b, " ");
			sb_cstr(b, json_string_value(json_object_get(d, "name")));
			sb_printf(b, ",");
		}
		sb_printf(b, " };\nstatic const int ktune_f%zu_structural[] = {", i);
		json_array_foreach(dims, k, d)
			sb_printf(b, " %d,", json_is_true(json_object_get(d, "structural")));
		sb_printf(b, " };\n");
	}
	sb_printf(b, "\nstatic const struct ktune_family ktune_families[] = {\n");
	json_array_foreach(fams, i, v) {
		sb_printf(b, "\t{ ");
		sb_cstr(b, json_string_value(json_object_get(v, "name")));
		sb_printf(b, ", %zu, ktune_f%zu_dims, ktune_f%zu_structural },\n",
			  json_array_size(json_object_get(v, "dims")), i, i);
	}
	if (!json_array_size(fams))
		sb_printf(b, "\t{ \"\", 0, NULL, NULL },\n");
	sb_printf(b, "};\n\n");

	json_array_foreach(entries, i, e) {
		json_t *cfg = json_object_get(e, "config"), *launch = json_object_get(e, "launch");
		json_t *progs = json_object_get(launch, "programs"), *bufs = json_object_get(launch, "buffers");
		json_t *p;
		const char *key;
		size_t pi, di;
		int np = 0;

		sb_printf(b, "/* entry %zu: %s %s on %s */\n", i,
			  json_string_value(json_object_get(e, "family")),
			  json_string_value(json_object_get(e, "shape_key")),
			  json_string_value(json_object_get(e, "device")));
		json_object_foreach(cfg, key, v)
			if (strcmp(key, "variant") != 0)
				np++;
		if (np) {
			sb_printf(b, "static const char *const ktune_e%zu_pnames[] = {", i);
			json_object_foreach(cfg, key, v)
				if (strcmp(key, "variant") != 0) {
					sb_printf(b, " ");
					sb_cstr(b, key);
					sb_printf(b, ",");
				}
			sb_printf(b, " };\nstatic const long ktune_e%zu_pvalues[] = {", i);
			json_object_foreach(cfg, key, v)
				if (strcmp(key, "variant") != 0)
					sb_printf(b, " %lldL,", (long long)json_integer_value(v));
			sb_printf(b, " };\n");
		}
		json_array_foreach(progs, pi, p) {
			json_t *defs = json_object_get(p, "defines"), *d;

			if (!json_array_size(defs))
				continue;
			sb_printf(b, "static const char *const ktune_e%zu_p%zu_defines[] = {", i, pi);
			json_array_foreach(defs, di, d) {
				sb_printf(b, " ");
				sb_cstr(b, json_string_value(d));
				sb_printf(b, ",");
			}
			sb_printf(b, " };\n");
		}
		sb_printf(b, "static const struct ktune_program ktune_e%zu_programs[] = {\n", i);
		json_array_foreach(progs, pi, p) {
			sb_printf(b, "\t{ ");
			sb_cstr(b, json_string_value(json_object_get(p, "template")));
			if (cuda)
				sb_printf(b, ", \"ktune_e%zu_p%zu.cu\", ", i, pi);
			else
				sb_printf(b, ", NULL, ");
			sb_cstr(b, json_string_value(json_object_get(p, "arch")));
			if (json_array_size(json_object_get(p, "defines")))
				sb_printf(b, ", %zu, ktune_e%zu_p%zu_defines },\n",
					  json_array_size(json_object_get(p, "defines")), i, pi);
			else
				sb_printf(b, ", 0, NULL },\n");
		}
		if (!json_array_size(progs))
			sb_printf(b, "\t{ \"\", NULL, \"\", 0, NULL },\n");
		sb_printf(b, "};\n");
		if (json_array_size(bufs)) {
			sb_printf(b, "static const struct ktune_buffer ktune_e%zu_buffers[] = {\n", i);
			json_array_foreach(bufs, di, p) {
				sb_printf(b, "\t{ ");
				sb_cstr(b, json_string_value(json_object_get(p, "name")));
				sb_printf(b, ", ");
				sb_cstr(b, json_string_value(json_object_get(p, "role")));
				sb_printf(b, ", ");
				sb_cstr(b, json_string_value(json_object_get(p, "dtype")));
				sb_printf(b, ", %lluULL },\n",
					  (unsigned long long)json_integer_value(json_object_get(p, "elems")));
			}
			sb_printf(b, "};\n");
		}
		emit_launches(b, (int)i, "prep", json_object_get(launch, "prep"), bufs);
		emit_launches(b, (int)i, "launch", json_object_get(launch, "launches"), bufs);
		sb_printf(b, "\n");
	}

	sb_printf(b, "static const struct ktune_entry ktune_entries[] = {\n");
	json_array_foreach(entries, i, e) {
		json_t *shape = json_object_get(e, "shape"), *launch = json_object_get(e, "launch");
		const char *fam = json_string_value(json_object_get(e, "family"));
		int fi = index_of(fams, "name", fam ? fam : "");
		int devi = index_of(devs, "uuid", jstr(e, "device"));
		json_t *dims = json_object_get(json_array_get(fams, fi), "dims"), *d, *cfg;
		size_t nprep = json_array_size(json_object_get(launch, "prep"));
		size_t nl = json_array_size(json_object_get(launch, "launches"));
		size_t nb = json_array_size(json_object_get(launch, "buffers"));
		const char *key;
		int np = 0;

		if (fi < 0 || devi < 0)
			return kt_err_set(err, KT_EINTERNAL, "entry %zu: family or device missing", i);
		sb_printf(b, "\t{ %d, %d, {", devi, fi);
		json_array_foreach(dims, k, d)
			sb_printf(b, " %lldL,", (long long)json_integer_value(
				json_object_get(shape, json_string_value(json_object_get(d, "name")))));
		sb_printf(b, " },\n\t  ");
		sb_cstr(b, json_string_value(json_object_get(e, "shape_key")));
		sb_printf(b, ", ");
		sb_cstr(b, json_string_value(json_object_get(e, "config_key")));
		sb_printf(b, ", ");
		cfg = json_object_get(e, "config");
		sb_cstr(b, json_string_value(json_object_get(cfg, "variant")));
		json_object_foreach(cfg, key, v)
			if (strcmp(key, "variant") != 0)
				np++;
		if (np)
			sb_printf(b, ",\n\t  %d, ktune_e%zu_pnames, ktune_e%zu_pvalues,\n", np, i, i);
		else
			sb_printf(b, ",\n\t  0, NULL, NULL,\n");
		sb_printf(b, "\t  %.17g, %.17g, %.17g, %.17g, %lldLL,\n", jreal(e, "median_us"),
			  jreal(e, "floor_us"),
			  jreal(json_object_get(e, "baselines"), "cublas_dense"),
			  jreal(json_object_get(e, "baselines"), "naive"),
			  (long long)json_integer_value(json_object_get(json_object_get(e, "sweep"), "id")));
		sb_printf(b, "\t  %zu, ktune_e%zu_programs, ", json_array_size(json_object_get(launch, "programs")), i);
		if (nb)
			sb_printf(b, "%zu, ktune_e%zu_buffers, ", nb, i);
		else
			sb_printf(b, "0, NULL, ");
		if (nprep)
			sb_printf(b, "%zu, ktune_e%zu_prep, ", nprep, i);
		else
			sb_printf(b, "0, NULL, ");
		if (nl)
			sb_printf(b, "%zu, ktune_e%zu_launch,\n\t  ", nl, i);
		else
			sb_printf(b, "0, NULL,\n\t  ");
		sb_cstr(b, json_string_value(json_object_get(launch, "transform")));
		sb_printf(b, " },\n");
	}
	if (!json_array_size(entries))
		sb_printf(b, "\t{ 0, 0, { 0 }, \"\", \"\", \"\", 0, NULL, NULL, 0, 0, 0, 0, 0,"
			     " 0, NULL, 0, NULL, 0, NULL, 0, NULL, \"\" },\n");
	sb_printf(b, "};\n");
	sb_printf(b, "%s", header_lookup);
	return 0;
}

/* #defines that rename each __global__ function of template tpl (and of
 * the .cuh files it includes) to ktune_e<entry>_<name>. */
static int rename_kernels(struct sbuf *b, const char *tpl, size_t entry)
{
	int t;

	if (!kt_template_find(tpl))
		return -1;
	for (t = 0; kt_templates[t].name; t++) {
		const char *p = kt_templates[t].text;

		if (strcmp(kt_templates[t].name, tpl) != 0 && !strstr(kt_templates[t].path, ".cuh"))
			continue;
		while ((p = strstr(p, "__global__"))) {
			const char *q = p + 10, *paren, *end, *start;

			p = q;
			/* the identifier before the parameter list, skipping
			 * __launch_bounds__(...) and other attributes */
			for (;;) {
				int depth = 1;

				if (!(paren = strchr(q, '(')))
					break;
				for (end = paren; end > q && isspace((unsigned char)end[-1]); end--)
					;
				for (start = end; start > q && (isalnum((unsigned char)start[-1]) ||
								start[-1] == '_'); start--)
					;
				if (strncmp(start, "__launch_bounds__", 17) != 0 &&
				    strncmp(start, "__attribute__", 13) != 0)
					break;
				for (q = paren + 1; *q && depth; q++)
					depth += *q == '(' ? 1 : *q == ')' ? -1 : 0;
			}
			if (paren && end > start && (size_t)(end - start) < 80)
				sb_printf(b, "#define %.*s ktune_e%zu_%.*s\n", (int)(end - start), start, entry,
					  (int)(end - start), start);
		}
	}
	return 0;
}

/* One .cu per program of an entry: the template with its defines fixed and
 * its kernels renamed, so all winners link into one binary. */
static int cuda_sources(json_t *doc, struct export_bundle *out, struct kt_err *err)
{
	json_t *e, *p;
	size_t i, pi, k;
	int t;

	json_array_foreach(json_object_get(doc, "entries"), i, e) {
		json_t *launch = json_object_get(e, "launch");

		json_array_foreach(json_object_get(launch, "programs"), pi, p) {
			struct sbuf b = { 0 };
			char name[96];
			json_t *d;
			const char *tpl = json_string_value(json_object_get(p, "template"));

			sb_printf(&b, "/* ktune export: entry %zu program %zu -- %s %s, %s (%s) */\n",
				  i, pi, json_string_value(json_object_get(e, "family")),
				  json_string_value(json_object_get(e, "shape_key")),
				  json_string_value(json_object_get(e, "config_key")),
				  json_string_value(json_object_get(p, "arch")));
			json_array_foreach(json_object_get(p, "defines"), k, d) {
				const char *def = json_string_value(d), *eq = strchr(def, '=');

				if (eq)
					sb_printf(&b, "#define %.*s %s\n", (int)(eq - def), def, eq + 1);
				else
					sb_printf(&b, "#define %s 1\n", def);
			}
			/* Every kernel of the template gets the entry's prefix, not
			 * only the launched ones: two entries of one template must
			 * link into one binary. */
			if (rename_kernels(&b, tpl, i) < 0) {
				free(b.s);
				return kt_err_set(err, KT_EINTERNAL, "unknown template '%s'", tpl);
			}
			sb_printf(&b, "#include \"%s.cu\"\n", tpl);
			snprintf(name, sizeof(name), "ktune_e%zu_p%zu.cu", i, pi);
			if (bundle_add(out, name, &b, err) < 0) {
				free(b.s);
				return -1;
			}
		}
	}
	/* The templates themselves, so the bundle builds on its own. */
	for (t = 0; kt_templates[t].name; t++) {
		struct sbuf b = { 0 };
		const char *base = strrchr(kt_templates[t].path, '/');

		sb_printf(&b, "%s", kt_templates[t].text);
		if (bundle_add(out, base ? base + 1 : kt_templates[t].path, &b, err) < 0) {
			free(b.s);
			return -1;
		}
	}
	return 0;
}

int export_build(struct store *st, enum export_format fmt, const struct export_filter *f,
		 struct export_bundle *out, struct kt_err *err)
{
	json_t *doc = NULL;
	struct sbuf b = { 0 };
	int rc = -1;

	memset(out, 0, sizeof(*out));
	if (export_json(st, f, &doc, err) < 0)
		goto out;
	if (fmt == EXPORT_JSON) {
		char *s = json_dumps(doc, JSON_INDENT(1) | JSON_ENSURE_ASCII);

		if (!s) {
			kt_err_set(err, KT_EINTERNAL, "out of memory");
			goto out;
		}
		b.s = s;
		b.len = strlen(s);
		b.cap = b.len + 1;
		sb_printf(&b, "\n");
		if (bundle_add(out, "ktune_export.json", &b, err) < 0)
			goto out;
	} else {
		if (header_from_json(doc, fmt == EXPORT_CUDA, &b, err) < 0 ||
		    bundle_add(out, "ktune_tuned.h", &b, err) < 0)
			goto out;
		if (fmt == EXPORT_CUDA && cuda_sources(doc, out, err) < 0)
			goto out;
	}
	rc = 0;
out:
	free(b.s);
	json_decref(doc);
	if (rc < 0)
		export_bundle_release(out);
	return rc;
}

static int write_file(const char *path, const struct export_file *f, struct kt_err *err)
{
	FILE *fp = strcmp(path, "-") == 0 ? stdout : fopen(path, "wb");
	int ok;

	if (!fp)
		return kt_err_set(err, KT_EIO, "%s: %s", path, strerror(errno));
	ok = fwrite(f->data, 1, f->len, fp) == f->len;
	if (fp == stdout)
		ok = fflush(fp) == 0 && ok;
	else
		ok = fclose(fp) == 0 && ok;
	if (!ok)
		return kt_err_set(err, KT_EIO, "%s: write failed", path);
	return 0;
}

int export_bundle_write(const struct export_bundle *b, enum export_format fmt,
			const char *path, struct kt_err *err)
{
	char full[2048];
	int i;

	if (fmt != EXPORT_CUDA)
		return b->n ? write_file(path, &b->files[0], err) : 0;
	if (strcmp(path, "-") == 0)
		return kt_err_set(err, KT_EINVAL, "--format cuda writes a directory: give --out DIR");
	if (mkdir(path, 0777) != 0 && errno != EEXIST)
		return kt_err_set(err, KT_EIO, "%s: %s", path, strerror(errno));
	for (i = 0; i < b->n; i++) {
		snprintf(full, sizeof(full), "%s/%s", path, b->files[i].name);
		if (write_file(full, &b->files[i], err) < 0)
			return -1;
	}
	return 0;
}
