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
#include "../runtime/rt.h"
#include "../runtime/sources.h"
#include "../templates/templates.h"
#include "jget.h"
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
	else if (strcmp(name, "lib") == 0 || strcmp(name, "cuda") == 0)
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
		"done", (json_int_t)sw.done, "started", sw.started, "finished", famjson_num_or_null(sw.finished),
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
	store_trial_rows_free(rows, n);
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
		e = json_pack("{s:s,s:s,s:s,s:s,s:o,s:s,s:o,s:o,s:f,s:f,s:f,s:o,s:o,"
			      "s:{s:o,s:o},s:o}",
			"device", d->uuid, "arch", d->arch, "family", fam->name,
			"shape_key", w[i].shape_key, "shape", famjson_shape(fam, &shape),
			"config_key", w[i].config_key, "config", famjson_config(fam, &cfg),
			"params", params ? params : famjson_config(fam, &cfg),
			"median_us", w[i].median_us, "min_us", w[i].min_us, "p90_us", w[i].p90_us,
			"retime_us", famjson_num_or_null(w[i].retime_us),
			"floor_us", famjson_num_or_null(kt_floor_us(fam, &shape, d->name)),
			"baselines", "cublas_dense", famjson_num_or_null(w[i].cublas_us),
			"naive", famjson_num_or_null(w[i].naive_us),
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

/* ---- the compiled-in table (format c) and the bundle (format lib) ----
 *
 * Both are data for libktune (include/ktune_builtin.h): the lookup and the
 * launches are the runtime's own code, which the bundle carries as sources
 * (runtime/sources.h), not a copy written here. */

static int index_of(json_t *arr, const char *field, const char *value)
{
	size_t i;
	json_t *v;

	json_array_foreach(arr, i, v)
		if (strcmp(jget_str(v, field), value) == 0)
			return (int)i;
	return -1;
}

/* One program of the bundle: a cubin, shared by every entry that runs it. */
struct bprog {
	struct kt_program p;
	char arch[16];
	char id[KT_MAX_DEFINES * 48 + 128];
	char used_by[160];	/* the first entries that use it, for its comment */
};

struct bprogs {
	int n, cap;
	struct bprog *v;
};

static int bprogs_add(struct bprogs *ps, const struct kt_program *p, const char *arch,
		      size_t entry, struct kt_err *err)
{
	char id[sizeof(ps->v[0].id)];
	struct bprog *b;
	int i;

	rt_program_id(p, arch, id, sizeof(id));
	for (i = 0; i < ps->n; i++)
		if (strcmp(ps->v[i].id, id) == 0) {
			size_t n = strlen(ps->v[i].used_by);

			if (n + 16 < sizeof(ps->v[i].used_by))
				snprintf(ps->v[i].used_by + n, sizeof(ps->v[i].used_by) - n, " %zu", entry);
			return 0;
		}
	if (ps->n == ps->cap) {
		int cap = ps->cap ? 2 * ps->cap : 16;
		struct bprog *nv = realloc(ps->v, (size_t)cap * sizeof(*nv));

		if (!nv)
			return kt_err_set(err, KT_EINTERNAL, "out of memory");
		ps->v = nv;
		ps->cap = cap;
	}
	b = &ps->v[ps->n++];
	memset(b, 0, sizeof(*b));
	b->p = *p;
	snprintf(b->arch, sizeof(b->arch), "%s", arch);
	snprintf(b->id, sizeof(b->id), "%s", id);
	snprintf(b->used_by, sizeof(b->used_by), "%zu", entry);
	return 0;
}

/* The programs libktune runs for every entry at its tuned shape (and the
 * prepare programs of families with prepared weights), deduplicated. An
 * entry that no longer plans (the family changed since the sweep) is left
 * to NVRTC at run time. */
static int bundle_programs(json_t *doc, struct bprogs *ps, struct kt_err *err)
{
	json_t *devs = json_object_get(doc, "devices"), *e;
	size_t i;
	int k;

	json_array_foreach(json_object_get(doc, "entries"), i, e) {
		const struct kt_family *f = kt_family_find(jget_str(e, "family"));
		json_t *d = json_array_get(devs, (size_t)index_of(devs, "uuid", jget_str(e, "device")));
		struct chain_device cd;
		struct kt_shape shape;
		struct kt_config cfg;
		struct kt_target tgt;
		struct kt_plan plan, prep;
		struct kt_err perr = { 0 };
		char arch[16];

		if (!f || !d || kt_shape_parse(f, jget_str(e, "shape_key"), &shape, &perr) < 0 ||
		    kt_config_parse(f, jget_str(e, "config_key"), &cfg, &perr) < 0)
			continue;
		memset(&cd, 0, sizeof(cd));
		snprintf(cd.name, sizeof(cd.name), "%s", jget_str(d, "name"));
		snprintf(cd.arch, sizeof(cd.arch), "%s", jget_str(d, "arch"));
		cd.sms = (int)jget_num(d, "sms");
		cd.l2_bytes = (long)jget_num(d, "l2_bytes");
		cd.smem_optin = (int)jget_num(d, "smem_optin");
		if (chain_target(cd.arch, &cd, &tgt, &perr) < 0 ||
		    rt_entry_plans(f, &shape, &cfg, &tgt, &plan, &prep, &perr) < 0)
			continue;
		kt_target_arch(&tgt, arch, sizeof(arch));
		for (k = 0; k < plan.nprograms; k++)
			if (bprogs_add(ps, &plan.programs[k], arch, i, err) < 0)
				return -1;
		for (k = 0; k < prep.nprograms; k++)
			if (bprogs_add(ps, &prep.programs[k], arch, i, err) < 0)
				return -1;
	}
	return 0;
}

/* The devices and entries as ktune_builtin arrays (static, named
 * ktune_tuned_devices / _entries), and their counts. */
static void table_arrays(struct sbuf *b, json_t *doc, int *ndev, int *nent)
{
	json_t *devs = json_object_get(doc, "devices"), *entries = json_object_get(doc, "entries");
	json_t *v;
	size_t i;

	*ndev = (int)json_array_size(devs);
	*nent = 0;
	if (*ndev) {
		sb_printf(b, "static const struct ktune_builtin_device ktune_tuned_devices[] = {\n");
		json_array_foreach(devs, i, v) {
			sb_printf(b, "\t{ ");
			sb_cstr(b, jget_str(v, "name"));
			sb_printf(b, ", ");
			sb_cstr(b, jget_str(v, "uuid"));
			sb_printf(b, ", ");
			sb_cstr(b, jget_str(v, "arch"));
			sb_printf(b, ", %d, %lldLL, %d },\n", (int)jget_num(v, "sms"),
				  (long long)jget_num(v, "l2_bytes"), (int)jget_num(v, "smem_optin"));
		}
		sb_printf(b, "};\n\n");
	}
	json_array_foreach(entries, i, v)
		*nent += index_of(devs, "uuid", jget_str(v, "device")) >= 0;
	if (!*nent)
		return;
	sb_printf(b, "static const struct ktune_builtin_entry ktune_tuned_entries[] = {\n");
	json_array_foreach(entries, i, v) {
		int d = index_of(devs, "uuid", jget_str(v, "device"));

		if (d < 0)
			continue;
		sb_printf(b, "\t{ %d, ", d);
		sb_cstr(b, jget_str(v, "family"));
		sb_printf(b, ",\n\t  ");
		sb_cstr(b, jget_str(v, "shape_key"));
		sb_printf(b, ",\n\t  ");
		sb_cstr(b, jget_str(v, "config_key"));
		sb_printf(b, ",\n\t  %.17g },\n", jget_num(v, "median_us"));
	}
	sb_printf(b, "};\n\n");
}

/* format c: one header holding the table, for a program that links
 * libktune; no binaries (NVRTC compiles on first use, cached on disk). */
static int c_header(json_t *doc, struct sbuf *b)
{
	int ndev, nent;

	sb_printf(b, "/*\n * ktune_tuned.h -- tuned configs exported by ktune %s on %s (format c):\n"
		     " * the compiled-in table for libktune (include/ktune.h). Open it with\n"
		     " * ktune_open_tuned(&t); every call then picks its config from it by\n"
		     " * ktune's lookup chain. It carries no binaries: libktune compiles a\n"
		     " * config's kernels with NVRTC on first use and caches them on disk\n"
		     " * (`ktune export --format lib` ships them compiled). Include it in one\n"
		     " * file of a program.\n */\n",
		  jget_str(doc, "ktune_version"), jget_str(doc, "generated"));
	sb_printf(b, "#ifndef KTUNE_TUNED_H\n#define KTUNE_TUNED_H\n\n#include \"ktune.h\"\n"
		     "#include \"ktune_builtin.h\"\n\n");
	table_arrays(b, doc, &ndev, &nent);
	sb_printf(b, "static const struct ktune_builtin ktune_tuned = {\n"
		     "\tKTUNE_BUILTIN_VERSION, %d, %s, %d, %s, 0, 0\n};\n\n", ndev,
		  ndev ? "ktune_tuned_devices" : "0", nent, nent ? "ktune_tuned_entries" : "0");
	sb_printf(b, "static inline int ktune_open_tuned(ktune_table **t)\n{\n"
		     "\treturn ktune_open_builtin(&ktune_tuned, t);\n}\n\n#endif\n");
	return 0;
}

/* The templates template tpl includes (#include "x.cu*"), itself first,
 * each once: the files whose kernels its program defines. */
static int template_closure(const char *tpl, const struct kt_template **out, int max)
{
	int n = 0, i, k;

	if (!(out[n] = kt_template_find(tpl)))
		return -1;
	n++;
	for (i = 0; i < n; i++) {
		const char *p = out[i]->text;

		while ((p = strstr(p, "#include \""))) {
			char name[64];
			size_t len;
			const struct kt_template *t;

			p += 10;
			len = strcspn(p, ".\"");
			if (len >= sizeof(name))
				continue;
			memcpy(name, p, len);
			name[len] = 0;
			if (!(t = kt_template_find(name)))
				continue;
			for (k = 0; k < n && out[k] != t; k++)
				;
			if (k == n && n < max)
				out[n++] = t;
		}
	}
	return n;
}

/* #defines that rename every __global__ function of the program's files
 * to prefix + name: each program's symbols are its own, so that every
 * program also links into one binary. */
static int rename_kernels(struct sbuf *b, const char *tpl, const char *prefix)
{
	const struct kt_template *files[32];
	char seen[64][80];
	int nfiles, nseen = 0, t, k;

	if ((nfiles = template_closure(tpl, files, 32)) < 0)
		return -1;
	for (t = 0; t < nfiles; t++) {
		const char *p = files[t]->text;

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
			if (!paren || end <= start || (size_t)(end - start) >= sizeof(seen[0]))
				continue;
			for (k = 0; k < nseen; k++)
				if (strlen(seen[k]) == (size_t)(end - start) &&
				    strncmp(seen[k], start, (size_t)(end - start)) == 0)
					break;
			if (k < nseen || nseen == 64)
				continue;
			snprintf(seen[nseen++], sizeof(seen[0]), "%.*s", (int)(end - start), start);
			sb_printf(b, "#define %.*s %s%.*s\n", (int)(end - start), start, prefix,
				  (int)(end - start), start);
		}
	}
	return 0;
}

/* -gencode for exactly the program's target: sm_90a programs as
 * compute_90a -> sm_90a, so that nvcc builds no compute_90 PTX of wgmma
 * code. */
static void gencode(char *buf, size_t len, const char *arch)
{
	snprintf(buf, len, "-gencode arch=compute_%s,code=%s", arch + 3, arch);
}

static const struct kt_source *source_find(const char *path)
{
	const struct kt_source *s;

	for (s = kt_runtime_sources; s->path; s++)
		if (strcmp(s->path, path) == 0)
			return s;
	return NULL;
}

static int add_text(struct export_bundle *out, const char *name, const char *text, size_t len,
		    struct kt_err *err)
{
	struct sbuf b = { 0 };

	sb_printf(&b, "%.*s", (int)len, text);
	if (bundle_add(out, name, &b, err) < 0) {
		free(b.s);
		return -1;
	}
	return 0;
}

/* format lib: the bundle folder (runtime/bundle.mk says what it builds). */
static int lib_bundle(json_t *doc, struct export_bundle *out, struct kt_err *err)
{
	struct bprogs ps = { 0 };
	const struct kt_source *src;
	struct sbuf b = { 0 };
	char name[128], gen[64];
	int ndev, nent, i, k, t, rc = -1;

	if (bundle_programs(doc, &ps, err) < 0)
		goto out;
	/* the sources of libktune, and the bundle's Makefile and check */
	for (src = kt_runtime_sources; src->path; src++) {
		if (strcmp(src->path, "runtime/bundle.mk") == 0)
			snprintf(name, sizeof(name), "Makefile");
		else if (strcmp(src->path, "runtime/bundle_check.c") == 0)
			snprintf(name, sizeof(name), "check/check_table.c");
		else if (strcmp(src->path, "runtime/bundle_gpu.c") == 0)
			snprintf(name, sizeof(name), "check/check_gpu.c");
		else
			snprintf(name, sizeof(name), "src/%s", src->path);
		if (add_text(out, name, src->text, src->len, err) < 0)
			goto out;
	}
	if (!source_find("runtime/bundle.mk")) {
		kt_err_set(err, KT_EINTERNAL, "this ktune was built without the bundle's Makefile");
		goto out;
	}
	for (t = 0; kt_templates[t].name; t++) {
		const char *base = strrchr(kt_templates[t].path, '/');

		snprintf(name, sizeof(name), "templates/%s", base ? base + 1 : kt_templates[t].path);
		if (add_text(out, name, kt_templates[t].text, kt_templates[t].len, err) < 0)
			goto out;
	}
	/* one source per program: its defines, its kernels renamed, its
	 * template; and the record that names its cubin in the table */
	for (i = 0; i < ps.n; i++) {
		const struct bprog *p = &ps.v[i];
		char prefix[32];

		snprintf(prefix, sizeof(prefix), "ktune_p%d_", i);
		sb_printf(&b, "/* ktune export: program %d, %s for %s (entries %s) */\n", i, p->p.tpl,
			  p->arch, p->used_by);
		for (k = 0; k < p->p.ndefines; k++) {
			const char *def = p->p.defines[k], *eq = strchr(def, '=');

			if (eq)
				sb_printf(&b, "#define %.*s %s\n", (int)(eq - def), def, eq + 1);
			else
				sb_printf(&b, "#define %s 1\n", def);
		}
		if (rename_kernels(&b, p->p.tpl, prefix) < 0) {
			kt_err_set(err, KT_EINTERNAL, "unknown template '%s'", p->p.tpl);
			goto out;
		}
		sb_printf(&b, "#include \"%s.cu\"\n", p->p.tpl);
		snprintf(name, sizeof(name), "kernels/p%d.cu", i);
		if (bundle_add(out, name, &b, err) < 0)
			goto out;
		sb_printf(&b, "/* ktune export: program %d's cubin (build/kernels/p%d_cubin.h, made by "
			     "make) */\n#include \"../src/include/ktune_builtin.h\"\n#include "
			     "\"p%d_cubin.h\"\n\nconst struct ktune_builtin_binary ktune_p%d_bin = {\n\t",
			  i, i, i, i);
		sb_cstr(&b, p->id);
		sb_printf(&b, ",\n\t\"%s\",\n\t(const unsigned char *)ktune_p%d_data,\n"
			     "\t(int64_t)sizeof(ktune_p%d_data) - 1\n};\n", prefix, i, i);
		snprintf(name, sizeof(name), "kernels/p%d_bin.c", i);
		if (bundle_add(out, name, &b, err) < 0)
			goto out;
	}
	sb_printf(&b, "# ktune export: the programs of the table and their targets\nPROGRAMS =");
	for (i = 0; i < ps.n; i++)
		sb_printf(&b, " p%d", i);
	sb_printf(&b, "\n");
	for (i = 0; i < ps.n; i++) {
		gencode(gen, sizeof(gen), ps.v[i].arch);
		sb_printf(&b, "GENCODE_p%d = %s\n", i, gen);
	}
	if (bundle_add(out, "programs.mk", &b, err) < 0)
		goto out;
	/* the table, with its binaries */
	sb_printf(&b, "/* ktune_table.c -- tuned configs exported by ktune %s on %s, with the "
		     "cubins of their programs */\n#include \"src/include/ktune_builtin.h\"\n\n",
		  jget_str(doc, "ktune_version"), jget_str(doc, "generated"));
	for (i = 0; i < ps.n; i++)
		sb_printf(&b, "extern const struct ktune_builtin_binary ktune_p%d_bin;\n", i);
	if (ps.n) {
		sb_printf(&b, "\nstatic const struct ktune_builtin_binary *const ktune_tuned_bins[] = {\n");
		for (i = 0; i < ps.n; i++)
			sb_printf(&b, "\t&ktune_p%d_bin,\n", i);
		sb_printf(&b, "};\n");
	}
	sb_printf(&b, "\n");
	table_arrays(&b, doc, &ndev, &nent);
	sb_printf(&b, "const struct ktune_builtin ktune_tuned = {\n"
		     "\tKTUNE_BUILTIN_VERSION, %d, %s, %d, %s, %d, %s\n};\n", ndev,
		  ndev ? "ktune_tuned_devices" : "0", nent, nent ? "ktune_tuned_entries" : "0", ps.n,
		  ps.n ? "ktune_tuned_bins" : "0");
	if (bundle_add(out, "ktune_table.c", &b, err) < 0)
		goto out;
	sb_printf(&b, "/*\n * ktune_tuned.h -- the tuned table of this bundle (ktune %s, %s), compiled\n"
		     " * into lib/libktune_tuned.a with its kernels. Open it with\n"
		     " * ktune_open_tuned(&t), then call the families of ktune.h.\n */\n"
		     "#ifndef KTUNE_TUNED_H\n#define KTUNE_TUNED_H\n\n#include \"ktune.h\"\n"
		     "#include \"ktune_builtin.h\"\n\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n"
		     "extern const struct ktune_builtin ktune_tuned;\n\n"
		     "static inline int ktune_open_tuned(ktune_table **t)\n{\n"
		     "\treturn ktune_open_builtin(&ktune_tuned, t);\n}\n\n"
		     "#ifdef __cplusplus\n}\n#endif\n\n#endif\n",
		  jget_str(doc, "ktune_version"), jget_str(doc, "generated"));
	if (bundle_add(out, "ktune_tuned.h", &b, err) < 0)
		goto out;
	sb_printf(&b, "/* every program's kernels linked into one binary: nothing to run */\n"
		     "int main(void)\n{\n\treturn 0;\n}\n");
	if (bundle_add(out, "check/link_main.cu", &b, err) < 0)
		goto out;
	rc = 0;
out:
	free(b.s);
	free(ps.v);
	return rc;
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
	} else if (fmt == EXPORT_C) {
		if (c_header(doc, &b) < 0 || bundle_add(out, "ktune_tuned.h", &b, err) < 0)
			goto out;
	} else if (lib_bundle(doc, out, err) < 0) {
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
		return kt_err_set(err, KT_EINVAL, "--format lib writes a directory: give --out DIR");
	if (mkdir(path, 0777) != 0 && errno != EEXIST)
		return kt_err_set(err, KT_EIO, "%s: %s", path, strerror(errno));
	for (i = 0; i < b->n; i++) {
		char *slash;

		snprintf(full, sizeof(full), "%s/%s", path, b->files[i].name);
		/* the folders of a nested name ("src/runtime/api.c") */
		for (slash = full + strlen(path) + 1; (slash = strchr(slash, '/')); slash++) {
			*slash = 0;
			if (mkdir(full, 0777) != 0 && errno != EEXIST) {
				*slash = '/';
				return kt_err_set(err, KT_EIO, "%s: %s", full, strerror(errno));
			}
			*slash = '/';
		}
		if (write_file(full, &b->files[i], err) < 0)
			return -1;
	}
	return 0;
}
