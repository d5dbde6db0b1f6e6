#include "import.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/family.h"
#include "export.h"
#include "jget.h"
#include "lookup.h"

/* A device's count fields are stored as C integers: an absent one reads as
 * 0, a present one must convert without overflow. */
#define L2_BYTES_MAX 1099511627776.0 /* 1 TiB */

static int count_ok(json_t *o, const char *k, double max)
{
	json_t *v = json_object_get(o, k);
	double x;

	if (!v)
		return 1;
	if (!json_is_number(v))
		return 0;
	x = json_number_value(v);
	return isfinite(x) && x >= 0 && x <= max;
}

static json_t *device_of(json_t *doc, const char *uuid)
{
	json_t *d;
	size_t i;

	json_array_foreach(json_object_get(doc, "devices"), i, d)
		if (strcmp(jget_str(d, "uuid"), uuid) == 0)
			return d;
	return NULL;
}

/* Everything checked before the first write. */
static int validate(json_t *doc, struct kt_err *err)
{
	json_t *devs = json_object_get(doc, "devices"), *entries = json_object_get(doc, "entries");
	json_t *d, *e;
	size_t i;

	if (!json_is_object(doc) || strcmp(jget_str(doc, "format"), EXPORT_FORMAT_NAME) != 0)
		return kt_err_set(err, KT_EINVAL, "not a ktune export (format must be \"%s\")",
				  EXPORT_FORMAT_NAME);
	if (!json_is_integer(json_object_get(doc, "version")) ||
	    json_integer_value(json_object_get(doc, "version")) > EXPORT_FORMAT_VERSION ||
	    json_integer_value(json_object_get(doc, "version")) < 1)
		return kt_err_set(err, KT_EINVAL, "export version %lld is not one this ktune reads (1..%d)",
				  (long long)json_integer_value(json_object_get(doc, "version")),
				  EXPORT_FORMAT_VERSION);
	if (!json_is_array(devs) || !json_is_array(entries))
		return kt_err_set(err, KT_EINVAL, "export without devices or entries arrays");
	json_array_foreach(devs, i, d)
		if (!*jget_str(d, "uuid") || !*jget_str(d, "name") || !*jget_str(d, "arch") ||
		    strlen(jget_str(d, "uuid")) >= 64 || strlen(jget_str(d, "name")) >= 128 ||
		    strlen(jget_str(d, "arch")) >= 16)
			return kt_err_set(err, KT_EINVAL, "device %zu: uuid, name and arch are required", i);
	json_array_foreach(devs, i, d) {
		static const char *const counts[] = { "sms", "smem_optin", "clock_mhz", "mem_clock_mhz" };

		for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++)
			if (!count_ok(d, counts[k], INT_MAX))
				return kt_err_set(err, KT_EINVAL, "device %zu: %s must be a number in 0..%d",
						  i, counts[k], INT_MAX);
		if (!count_ok(d, "l2_bytes", L2_BYTES_MAX))
			return kt_err_set(err, KT_EINVAL, "device %zu: l2_bytes must be a number in 0..%.0f",
					  i, L2_BYTES_MAX);
	}
	json_array_foreach(entries, i, e) {
		const struct kt_family *f = kt_family_find(jget_str(e, "family"));
		struct kt_shape s;
		struct kt_config c;
		char key[512];
		json_t *sw = json_object_get(e, "sweep");

		if (!json_is_object(e))
			return kt_err_set(err, KT_EINVAL, "entry %zu is not an object", i);
		if (!device_of(doc, jget_str(e, "device")))
			return kt_err_set(err, KT_EINVAL, "entry %zu: device '%s' not in devices", i,
					  jget_str(e, "device"));
		if (!f)
			return kt_err_set(err, KT_EINVAL, "entry %zu: unknown family '%s'", i,
					  jget_str(e, "family"));
		if (kt_shape_parse(f, jget_str(e, "shape_key"), &s, err) < 0 ||
		    kt_config_parse(f, jget_str(e, "config_key"), &c, err) < 0) {
			char m[400];

			/* Say which entry: the parser's message has no index. */
			snprintf(m, sizeof(m), "%.399s", err->msg);
			snprintf(err->msg, sizeof(err->msg), "entry %zu: %s", i, m);
			return -1;
		}
		kt_shape_key(f, &s, key, sizeof(key));
		if (strcmp(key, jget_str(e, "shape_key")) != 0)
			return kt_err_set(err, KT_EINVAL, "entry %zu: shape key '%s' is not canonical ('%s')",
					  i, jget_str(e, "shape_key"), key);
		if (!(jget_num(e, "median_us") > 0) || !isfinite(jget_num(e, "median_us")))
			return kt_err_set(err, KT_EINVAL, "entry %zu: median_us must be a positive time", i);
		if (!json_is_object(sw) || !*jget_str(sw, "strategy"))
			return kt_err_set(err, KT_EINVAL, "entry %zu: sweep with a strategy is required", i);
	}
	return 0;
}

/* json_dumps of j, then drops j. */
struct find_cfg {
	const char *key;
	int found;
};

static void trial_seen(const char *config_key, void *arg)
{
	struct find_cfg *fc = arg;

	if (strcmp(config_key, fc->key) == 0)
		fc->found = 1;
}

/* The existing sweep with this plan, or 0: one index lookup (listing every
 * sweep per entry made an import quadratic). */
static int find_sweep(struct store *st, int64_t dev, int64_t prob, const char *strategy,
		      const char *options_key, int64_t *id, struct kt_err *err)
{
	return store_sweep_find(st, dev, prob, strategy, options_key, id, err) < 0 ? -1 : 0;
}

static int import_entry(struct store *st, json_t *doc, json_t *e, struct import_stats *stats,
			struct kt_err *err)
{
	const struct kt_family *f = kt_family_find(jget_str(e, "family"));
	json_t *sw = json_object_get(e, "sweep"), *prov = NULL, *tr = json_object_get(e, "trial");
	json_t *base = json_object_get(e, "baselines");
	struct store_device dev;
	struct store_sweep_spec spec;
	struct store_trial t;
	struct find_cfg fc;
	struct kt_shape s;
	struct kt_config c;
	char shape_key[512], config_key[512];
	char *shape_json = NULL, *params_json = NULL, *prov_json = NULL;
	const char *options_key = *jget_str(sw, "options_key") ? jget_str(sw, "options_key") : "import";
	const char *names[2] = { "cublas_dense", "naive" };
	int64_t prob, cfg, sweep_id;
	int resumed, rc = -1, found, i;

	memset(&dev, 0, sizeof(dev));
	if ((found = store_device_find(st, jget_str(e, "device"), &dev, err)) <= 0) {
		if (found == 0)
			kt_err_set(err, KT_EINTERNAL, "device %s vanished", jget_str(e, "device"));
		return -1;
	}
	kt_shape_parse(f, jget_str(e, "shape_key"), &s, err);
	kt_config_parse(f, jget_str(e, "config_key"), &c, err);
	kt_shape_key(f, &s, shape_key, sizeof(shape_key));
	kt_config_key(f, &c, config_key, sizeof(config_key));
	/* The keys were validated; the JSON forms are rebuilt from them so a
	 * document without "shape" or "params" still imports. */
	shape_json = famjson_shape_text(f, &s);
	params_json = json_is_object(json_object_get(e, "params")) ?
		      json_dumps(json_object_get(e, "params"), JSON_COMPACT) :
		      famjson_config_text(f, &c);
	if (!shape_json || !params_json) {
		kt_err_set(err, KT_EINTERNAL, "out of memory");
		goto out;
	}
	if (store_problem_intern(st, f->name, shape_key, shape_json, &prob, err) < 0 ||
	    store_config_intern(st, f->name, config_key, params_json, &cfg, err) < 0)
		goto out;
	if (find_sweep(st, dev.id, prob, jget_str(sw, "strategy"), options_key, &sweep_id, err) < 0)
		goto out;
	if (sweep_id) {
		fc.key = config_key;
		fc.found = 0;
		if (store_trials_done(st, sweep_id, trial_seen, &fc, err) < 0)
			goto out;
		if (fc.found) {
			stats->entries_skipped++;
			rc = 0;
			goto out;
		}
	}
	/* Provenance: the sweep's own, plus where and when it was imported
	 * from -- kept from the first import when a file is re-exported. */
	prov = json_deep_copy(json_object_get(sw, "provenance"));
	if (!json_is_object(prov)) {
		json_decref(prov);
		prov = json_object();
	}
	if (!json_object_get(prov, "imported_from"))
		json_object_set_new(prov, "imported_from", json_pack("{s:I,s:f,s:o,s:s,s:s,s:s}",
			"sweep_id", (json_int_t)json_integer_value(json_object_get(sw, "id")),
			"started", jget_num(sw, "started"),
			"finished", famjson_num_or_null(jget_num(sw, "finished")),
			"status", jget_str(sw, "status"), "ktune_version", jget_str(doc, "ktune_version"),
			"generated", jget_str(doc, "generated")));
	if (!(prov_json = json_dumps(prov, JSON_COMPACT))) {
		kt_err_set(err, KT_EINTERNAL, "out of memory");
		goto out;
	}
	memset(&spec, 0, sizeof(spec));
	spec.device_id = dev.id;
	spec.problem_id = prob;
	spec.strategy = jget_str(sw, "strategy");
	spec.options_key = options_key;
	spec.provenance_json = prov_json;
	spec.planned = (long)json_integer_value(json_object_get(sw, "planned"));
	/* The original's start: the sweep's identity when databases that
	 * imported the same file are merged. */
	spec.started = jget_num(sw, "started");
	if (store_sweep_begin(st, &spec, &sweep_id, &resumed, err) < 0)
		goto out;
	memset(&t, 0, sizeof(t));
	t.sweep_id = sweep_id;
	t.config_id = cfg;
	t.status = "ok";
	t.median_us = jget_num(e, "median_us");
	t.min_us = jget_num(e, "min_us") > 0 ? jget_num(e, "min_us") : t.median_us;
	t.p90_us = jget_num(e, "p90_us") > 0 ? jget_num(e, "p90_us") : t.median_us;
	t.spread = jget_num(tr, "spread");
	t.reps = (int)json_integer_value(json_object_get(tr, "reps"));
	t.rel_err = json_is_number(json_object_get(tr, "rel_err")) ? jget_num(tr, "rel_err") : -1;
	t.compile_ms = jget_num(tr, "compile_ms");
	t.message = "imported";
	if (store_trial_add(st, &t, err) < 0)
		goto out;
	if (jget_num(e, "retime_us") > 0 &&
	    store_retime_set(st, sweep_id, config_key, jget_num(e, "retime_us"), err) < 0)
		goto out;
	for (i = 0; i < 2; i++) {
		double us = jget_num(base, names[i]), have = 0;
		int got;

		if (!(us > 0))
			continue;
		if ((got = store_baseline_get(st, dev.id, prob, names[i], &have, err)) < 0)
			goto out;
		if (got && have == us)
			continue;
		if (store_baseline_add(st, dev.id, prob, sweep_id, names[i], us, err) < 0)
			goto out;
	}
	if (store_sweep_end(st, sweep_id, strcmp(jget_str(sw, "status"), "done") == 0 ||
			    !*jget_str(sw, "status") ? STORE_SWEEP_DONE : STORE_SWEEP_INTERRUPTED,
			    err) < 0)
		goto out;
	stats->entries_added++;
	rc = 0;
out:
	json_decref(prov);
	free(prov_json);
	free(shape_json);
	free(params_json);
	return rc;
}

/* All of it or nothing: one transaction (the store functions' own
 * transactions nest inside it as savepoints), so a database error halfway
 * (a full disk, a constraint) leaves the store as it was, and the stats
 * then count nothing. */
int import_json(struct store *st, json_t *doc, struct import_stats *stats, struct kt_err *err)
{
	struct import_stats local;
	json_t *d, *e;
	size_t i;

	if (!stats)
		stats = &local;
	memset(stats, 0, sizeof(*stats));
	if (validate(doc, err) < 0)
		return -1;
	if (store_tx_begin(st, err) < 0)
		return -1;
	json_array_foreach(json_object_get(doc, "devices"), i, d) {
		struct store_device dev;

		memset(&dev, 0, sizeof(dev));
		snprintf(dev.name, sizeof(dev.name), "%s", jget_str(d, "name"));
		snprintf(dev.uuid, sizeof(dev.uuid), "%s", jget_str(d, "uuid"));
		snprintf(dev.arch, sizeof(dev.arch), "%s", jget_str(d, "arch"));
		dev.sms = (int)jget_num(d, "sms");
		dev.l2_bytes = (long)jget_num(d, "l2_bytes");
		dev.smem_optin = (int)jget_num(d, "smem_optin");
		dev.clock_mhz = (int)jget_num(d, "clock_mhz");
		dev.mem_clock_mhz = (int)jget_num(d, "mem_clock_mhz");
		snprintf(dev.driver, sizeof(dev.driver), "%s", jget_str(d, "driver"));
		snprintf(dev.cuda, sizeof(dev.cuda), "%s", jget_str(d, "cuda"));
		snprintf(dev.nvrtc, sizeof(dev.nvrtc), "%s", jget_str(d, "nvrtc"));
		if (store_device_upsert(st, &dev, err) < 0)
			goto fail;
		stats->devices++;
	}
	json_array_foreach(json_object_get(doc, "entries"), i, e) {
		stats->entries++;
		if (import_entry(st, doc, e, stats, err) < 0)
			goto fail;
	}
	if (store_tx_commit(st, err) < 0)
		goto fail;
	return 0;
fail:
	store_tx_rollback(st);
	memset(stats, 0, sizeof(*stats));
	return -1;
}

int import_json_text(struct store *st, const char *text, size_t len,
		     struct import_stats *stats, struct kt_err *err)
{
	json_error_t je;
	json_t *doc = json_loadb(text, len, 0, &je);
	int rc;

	if (!doc)
		return kt_err_set(err, KT_EINVAL, "not JSON: %s (line %d, column %d)", je.text,
				  je.line, je.column);
	rc = import_json(st, doc, stats, err);
	json_decref(doc);
	return rc;
}

int import_json_file_load(const char *path, json_t **doc, struct kt_err *err)
{
	json_error_t je;

	if (!(*doc = json_load_file(path, 0, &je))) {
		if (je.line <= 0)
			return kt_err_set(err, KT_EIO, "%s: %s", path, je.text);
		return kt_err_set(err, KT_EINVAL, "%s: not JSON: %s (line %d)", path, je.text, je.line);
	}
	if (validate(*doc, err) < 0) {
		char m[sizeof(err->msg)];

		snprintf(m, sizeof(m), "%s", err->msg);
		snprintf(err->msg, sizeof(err->msg), "%.200s: %.300s", path, m);
		json_decref(*doc);
		*doc = NULL;
		return -1;
	}
	return 0;
}

int import_json_file_stats(struct store *st, const char *path, struct import_stats *stats,
			   struct kt_err *err)
{
	json_t *doc = NULL;
	int rc;

	if (import_json_file_load(path, &doc, err) < 0)
		return -1;
	rc = import_json(st, doc, stats, err);
	json_decref(doc);
	return rc;
}

int import_json_file(struct store *st, const char *path, struct kt_err *err)
{
	return import_json_file_stats(st, path, NULL, err);
}
