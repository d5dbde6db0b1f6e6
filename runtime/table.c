/*
 * table.c -- opening tuned tables (the JSON export, a bundle's compiled-in
 * table, none), the options, and the shipped binaries.
 */
#include "rt.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../include/ktune_builtin.h"
#include "json_min.h"
#include "../util/knobs.h"

static _Thread_local char last_error[1024];

int rt_fail(int status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	va_end(ap);
	return status;
}

void rt_ok(void)
{
	last_error[0] = 0;
}

int rt_fail_err(const struct kt_err *e)
{
	int st;

	switch (e->code) {
	case KT_OK: st = KTUNE_ERROR_INTERNAL; break;
	case KT_EINVAL: st = KTUNE_ERROR_INVALID; break;
	case KT_ENOTFOUND: st = KTUNE_ERROR_NOT_FOUND; break;
	case KT_ECORRUPT: case KT_ESCHEMA: st = KTUNE_ERROR_BAD_TABLE; break;
	case KT_EIO: st = KTUNE_ERROR_NOT_FOUND; break;
	case KT_ENOGPU: st = KTUNE_ERROR_NO_GPU; break;
	case KT_ECUDA: st = KTUNE_ERROR_CUDA; break;
	case KT_ECOMPILE: st = KTUNE_ERROR_COMPILE; break;
	default: st = KTUNE_ERROR_INTERNAL; break;
	}
	return rt_fail(st, "%s", e->msg[0] ? e->msg : kt_errcode_name(e->code));
}

const char *ktune_last_error(void)
{
	return last_error;
}

int ktune_api_version(void)
{
	return KTUNE_API_VERSION;
}

const char *ktune_status_name(int status)
{
	static const char *const names[] = {
		"KTUNE_OK", "KTUNE_ERROR_INVALID", "KTUNE_ERROR_NOT_FOUND",
		"KTUNE_ERROR_BAD_TABLE", "KTUNE_ERROR_UNSUPPORTED", "KTUNE_ERROR_NO_GPU",
		"KTUNE_ERROR_CUDA", "KTUNE_ERROR_COMPILE", "KTUNE_ERROR_CAPTURE",
		"KTUNE_ERROR_WORKSPACE", "KTUNE_ERROR_INTERNAL",
	};

	if (status < 0 || status >= (int)(sizeof(names) / sizeof(names[0])))
		return "KTUNE_ERROR_UNKNOWN";
	return names[status];
}

/* The default cache folder: $KTUNE_CACHE_DIR, $XDG_CACHE_HOME/ktune,
 * ~/.cache/ktune, or none. */
static void default_cache_dir(char *buf, size_t len)
{
	const char *v;

	buf[0] = 0;
	if ((v = kt_knob_get(KT_KNOB_CACHE_DIR)))
		snprintf(buf, len, "%s", v);
	else if ((v = getenv("XDG_CACHE_HOME")) && *v)
		snprintf(buf, len, "%s/ktune", v);
	else if ((v = getenv("HOME")) && *v)
		snprintf(buf, len, "%s/.cache/ktune", v);
}

int rt_table_new(struct ktune_table **out)
{
	struct ktune_table *t = calloc(1, sizeof(*t));

	*out = NULL;
	if (!t)
		return rt_fail(KTUNE_ERROR_INTERNAL, "out of memory");
	if (pthread_mutex_init(&t->lock, NULL) != 0) {
		free(t);
		return rt_fail(KTUNE_ERROR_INTERNAL, "pthread_mutex_init failed");
	}
	if (pthread_mutex_init(&t->build, NULL) != 0) {
		pthread_mutex_destroy(&t->lock);
		free(t);
		return rt_fail(KTUNE_ERROR_INTERNAL, "pthread_mutex_init failed");
	}
	default_cache_dir(t->cache_dir, sizeof(t->cache_dir));
	t->nvrtc = 1;
	t->pdl = kt_knob_flag(KT_KNOB_PDL);
	t->max_distance = CHAIN_MAX_DISTANCE;
	*out = t;
	return KTUNE_OK;
}

void rt_table_free(struct ktune_table *t)
{
	int i;

	if (!t)
		return;
	for (i = 0; i < t->nbins; i++) {
		free(t->bins[i].program);
		free(t->bins[i].owned);
	}
	free(t->bins);
	free(t->devices);
	free(t->uuids);
	free(t->entries);
	pthread_mutex_destroy(&t->lock);
	pthread_mutex_destroy(&t->build);
	free(t);
}

void rt_program_id(const struct kt_program *p, const char *arch, char *buf, size_t len)
{
	size_t n = (size_t)snprintf(buf, len, "%s %s", p->tpl, arch);
	int i;

	for (i = 0; i < p->ndefines && n < len; i++)
		n += (size_t)snprintf(buf + n, len - n, " %s", p->defines[i]);
}

const struct rt_bin *rt_bin_find(const struct ktune_table *t, const struct kt_program *p,
				 const char *arch)
{
	char id[KT_MAX_DEFINES * 48 + 128];
	int i;

	if (!t->nbins)
		return NULL;
	rt_program_id(p, arch, id, sizeof(id));
	for (i = 0; i < t->nbins; i++)
		if (strcmp(t->bins[i].program, id) == 0)
			return &t->bins[i];
	return NULL;
}

/* Adds an entry from its family, keys and device; 1 when it was skipped
 * (unknown family or a key this library cannot parse: a newer ktune's). */
static int entry_add(struct ktune_table *t, int device, const char *family, const char *shape,
		     const char *config, double median_us)
{
	const struct kt_family *f = family ? kt_family_find(family) : NULL;
	struct chain_entry *e = &t->entries[t->nentries];
	struct kt_err err = { 0 };

	if (!f || !shape || !config || device < 0 || device >= t->ndevices ||
	    kt_shape_parse(f, shape, &e->shape, &err) < 0 ||
	    kt_config_parse(f, config, &e->cfg, &err) < 0) {
		t->skipped++;
		return 1;
	}
	e->fam = f;
	e->device = device;
	e->median_us = median_us;
	t->nentries++;
	return 0;
}

static void device_set(struct chain_device *d, const char *name, const char *arch, long sms,
		       long long l2, long smem)
{
	snprintf(d->name, sizeof(d->name), "%s", name ? name : "");
	snprintf(d->arch, sizeof(d->arch), "%s", arch ? arch : "");
	d->sms = (int)sms;
	d->l2_bytes = (long)l2;
	d->smem_optin = (int)smem;
}

static int load_json(struct ktune_table *t, const char *text, size_t len, const char *what)
{
	const struct jm_node *devs, *ents;
	struct jm_node *doc;
	char why[200];
	const char *fmt;
	int i, k, rc = KTUNE_OK;

	if (!(doc = jm_parse(text, len, why, sizeof(why))))
		return rt_fail(KTUNE_ERROR_BAD_TABLE, "%s: not JSON: %s", what, why);
	fmt = jm_str(doc, "format", NULL);
	devs = jm_get(doc, "devices");
	ents = jm_get(doc, "entries");
	if (!fmt || strcmp(fmt, "ktune-export") != 0 || !devs || devs->type != JM_ARRAY || !ents ||
	    ents->type != JM_ARRAY) {
		rc = rt_fail(KTUNE_ERROR_BAD_TABLE,
			     "%s: not a ktune export (want format \"ktune-export\" with devices and "
			     "entries arrays: `ktune export --format json`)", what);
		goto out;
	}
	if ((devs->n && !(t->devices = calloc((size_t)devs->n, sizeof(*t->devices)))) ||
	    (devs->n && !(t->uuids = calloc((size_t)devs->n, sizeof(*t->uuids)))) ||
	    (ents->n && !(t->entries = calloc((size_t)ents->n, sizeof(*t->entries))))) {
		rc = rt_fail(KTUNE_ERROR_INTERNAL, "out of memory");
		goto out;
	}
	for (i = 0; i < devs->n; i++) {
		const struct jm_node *d = devs->kids[i];

		if (!jm_str(d, "name", NULL) || !jm_str(d, "arch", NULL)) {
			rc = rt_fail(KTUNE_ERROR_BAD_TABLE, "%s: device %d lacks a name or arch", what,
				     i);
			goto out;
		}
		device_set(&t->devices[i], jm_str(d, "name", ""), jm_str(d, "arch", ""),
			   (long)jm_num(d, "sms", 0), (long long)jm_num(d, "l2_bytes", 0),
			   (long)jm_num(d, "smem_optin", 0));
		snprintf(t->uuids[i], sizeof(t->uuids[i]), "%s", jm_str(d, "uuid", ""));
	}
	t->ndevices = devs->n;
	for (i = 0; i < ents->n; i++) {
		const struct jm_node *e = ents->kids[i];
		const char *dev = jm_str(e, "device", "");

		/* devices by uuid, as the export names them */
		for (k = 0; k < devs->n; k++)
			if (strcmp(jm_str(devs->kids[k], "uuid", ""), dev) == 0)
				break;
		entry_add(t, k < devs->n ? k : -1, jm_str(e, "family", NULL),
			  jm_str(e, "shape_key", NULL), jm_str(e, "config_key", NULL),
			  jm_num(e, "median_us", 0));
	}
out:
	jm_free(doc);
	return rc;
}

int ktune_open_json_text(const char *text, int64_t len, ktune_table **out)
{
	struct ktune_table *t;
	int rc;

	if (!out)
		return rt_fail(KTUNE_ERROR_INVALID, "ktune_open_json_text: out is NULL");
	*out = NULL;
	if (!text || len < 0)
		return rt_fail(KTUNE_ERROR_INVALID, "ktune_open_json_text: no text");
	if ((rc = rt_table_new(&t)) != KTUNE_OK)
		return rc;
	if ((rc = load_json(t, text, (size_t)len, "table")) != KTUNE_OK) {
		rt_table_free(t);
		return rc;
	}
	*out = t;
	rt_ok();
	return KTUNE_OK;
}

int ktune_open_json(const char *path, ktune_table **out)
{
	struct ktune_table *t = NULL;
	FILE *fp = NULL;
	char *text = NULL;
	long len;
	int rc;

	if (!out)
		return rt_fail(KTUNE_ERROR_INVALID, "ktune_open_json: out is NULL");
	*out = NULL;
	if (!path && !(path = kt_knob_get(KT_KNOB_TABLE)))
		return rt_fail(KTUNE_ERROR_NOT_FOUND,
			       "no table: give a path or set KTUNE_TABLE to a `ktune export --format "
			       "json` file");
	if (!(fp = fopen(path, "rb")))
		return rt_fail(KTUNE_ERROR_NOT_FOUND, "%s: %s", path, strerror(errno));
	if (fseek(fp, 0, SEEK_END) != 0 || (len = ftell(fp)) < 0 || fseek(fp, 0, SEEK_SET) != 0) {
		rc = rt_fail(KTUNE_ERROR_NOT_FOUND, "%s: cannot read it", path);
		goto out;
	}
	if (!(text = malloc((size_t)len + 1))) {
		rc = rt_fail(KTUNE_ERROR_INTERNAL, "out of memory");
		goto out;
	}
	if (fread(text, 1, (size_t)len, fp) != (size_t)len) {
		rc = rt_fail(KTUNE_ERROR_NOT_FOUND, "%s: read failed", path);
		goto out;
	}
	if ((rc = rt_table_new(&t)) != KTUNE_OK)
		goto out;
	if ((rc = load_json(t, text, (size_t)len, path)) != KTUNE_OK)
		goto out;
	*out = t;
	t = NULL;
	rt_ok();
out:
	if (t)
		rt_table_free(t);
	free(text);
	fclose(fp);
	return rc;
}

int ktune_open_defaults(ktune_table **out)
{
	int rc;

	if (!out)
		return rt_fail(KTUNE_ERROR_INVALID, "ktune_open_defaults: out is NULL");
	if ((rc = rt_table_new(out)) == KTUNE_OK)
		rt_ok();
	return rc;
}

int ktune_open_builtin(const struct ktune_builtin *b, ktune_table **out)
{
	struct ktune_table *t;
	int i, rc;

	if (!out)
		return rt_fail(KTUNE_ERROR_INVALID, "ktune_open_builtin: out is NULL");
	*out = NULL;
	if (!b || b->version != KTUNE_BUILTIN_VERSION)
		return rt_fail(KTUNE_ERROR_BAD_TABLE,
			       "compiled-in table of version %d, this libktune reads %d: rebuild the "
			       "bundle with this ktune", b ? (int)b->version : -1,
			       KTUNE_BUILTIN_VERSION);
	if ((rc = rt_table_new(&t)) != KTUNE_OK)
		return rc;
	if ((b->ndevices > 0 && !(t->devices = calloc((size_t)b->ndevices, sizeof(*t->devices)))) ||
	    (b->ndevices > 0 && !(t->uuids = calloc((size_t)b->ndevices, sizeof(*t->uuids)))) ||
	    (b->nentries > 0 && !(t->entries = calloc((size_t)b->nentries, sizeof(*t->entries)))) ||
	    (b->nbinaries > 0 && !(t->bins = calloc((size_t)b->nbinaries, sizeof(*t->bins))))) {
		rt_table_free(t);
		return rt_fail(KTUNE_ERROR_INTERNAL, "out of memory");
	}
	for (i = 0; i < b->ndevices; i++) {
		device_set(&t->devices[i], b->devices[i].name, b->devices[i].arch, b->devices[i].sms,
			   (long long)b->devices[i].l2_bytes, b->devices[i].smem_optin);
		snprintf(t->uuids[i], sizeof(t->uuids[i]), "%s",
			 b->devices[i].uuid ? b->devices[i].uuid : "");
	}
	t->ndevices = b->ndevices > 0 ? b->ndevices : 0;
	for (i = 0; i < b->nentries; i++)
		entry_add(t, b->entries[i].device, b->entries[i].family, b->entries[i].shape,
			  b->entries[i].config, b->entries[i].median_us);
	for (i = 0; i < b->nbinaries; i++) {
		const struct ktune_builtin_binary *y = b->binaries[i];
		struct rt_bin *x = &t->bins[t->nbins];

		if (!y || !y->program || !y->data || y->len <= 0)
			continue;
		if (!(x->program = strdup(y->program))) {
			rt_table_free(t);
			return rt_fail(KTUNE_ERROR_INTERNAL, "out of memory");
		}
		snprintf(x->prefix, sizeof(x->prefix), "%s", y->prefix ? y->prefix : "");
		x->data = y->data;
		x->len = (size_t)y->len;
		t->nbins++;
	}
	*out = t;
	rt_ok();
	return KTUNE_OK;
}

int ktune_set_option(ktune_table *t, const char *name, const char *value)
{
	int rc = KTUNE_OK;

	if (!t || !name || !value)
		return rt_fail(KTUNE_ERROR_INVALID, "ktune_set_option: NULL argument");
	pthread_mutex_lock(&t->lock);
	if (strcmp(name, "cache_dir") == 0) {
		if (strlen(value) >= sizeof(t->cache_dir))
			rc = rt_fail(KTUNE_ERROR_INVALID, "cache_dir: path too long");
		else
			snprintf(t->cache_dir, sizeof(t->cache_dir), "%s", value);
	} else if (strcmp(name, "nvrtc") == 0) {
		if (strcmp(value, "0") && strcmp(value, "1"))
			rc = rt_fail(KTUNE_ERROR_INVALID, "nvrtc: \"0\" or \"1\", not \"%s\"", value);
		else
			t->nvrtc = value[0] == '1';
	} else if (strcmp(name, "max_distance") == 0) {
		char *end;
		double v = strtod(value, &end);

		if (strcmp(value, "inf") == 0 || strcmp(value, "none") == 0)
			v = INFINITY;
		else if (*end || end == value || isnan(v) || v < 0)
			rc = rt_fail(KTUNE_ERROR_INVALID,
				     "max_distance: a log-distance >= 0 or \"inf\", not \"%s\"", value);
		if (rc == KTUNE_OK) {
			t->max_distance = v;
			t->generation++;
		}
	} else if (strcmp(name, "arch") == 0) {
		struct kt_target tg;

		if (*value && kt_target_named(value, &tg) < 0)
			rc = rt_fail(KTUNE_ERROR_INVALID,
				     "arch: \"%s\" is not a target ktune knows (sm_80, sm_86, sm_89, "
				     "sm_90, sm_90a)", value);
		else
			snprintf(t->arch, sizeof(t->arch), "%s", value);
	} else if (strcmp(name, "device") == 0) {
		if (strlen(value) >= sizeof(t->device)) {
			rc = rt_fail(KTUNE_ERROR_INVALID, "device: name too long");
		} else {
			snprintf(t->device, sizeof(t->device), "%s", value);
			t->generation++;
		}
	} else {
		rc = rt_fail(KTUNE_ERROR_INVALID,
			     "unknown option '%s' (cache_dir, nvrtc, max_distance, arch, device)",
			     name);
	}
	pthread_mutex_unlock(&t->lock);
	if (rc == KTUNE_OK)
		rt_ok();
	return rc;
}

int rt_table_add_device(struct ktune_table *t, const char *name, const char *uuid,
			const char *arch, long sms, long long l2, long smem)
{
	struct chain_device *d = realloc(t->devices, (size_t)(t->ndevices + 1) * sizeof(*d));
	char (*u)[64];

	if (!d)
		return rt_fail(KTUNE_ERROR_INTERNAL, "out of memory");
	t->devices = d;
	if (!(u = realloc(t->uuids, (size_t)(t->ndevices + 1) * sizeof(*u))))
		return rt_fail(KTUNE_ERROR_INTERNAL, "out of memory");
	t->uuids = u;
	memset(&t->devices[t->ndevices], 0, sizeof(*d));
	device_set(&t->devices[t->ndevices], name, arch, sms, l2, smem);
	snprintf(t->uuids[t->ndevices], sizeof(t->uuids[0]), "%s", uuid ? uuid : "");
	t->ndevices++;
	return KTUNE_OK;
}

int rt_table_add_entry(struct ktune_table *t, int device, const char *family, const char *shape,
		       const char *config, double median_us)
{
	struct chain_entry *e = realloc(t->entries, (size_t)(t->nentries + 1) * sizeof(*e));

	if (!e)
		return rt_fail(KTUNE_ERROR_INTERNAL, "out of memory");
	t->entries = e;
	memset(&t->entries[t->nentries], 0, sizeof(*e));
	entry_add(t, device, family, shape, config, median_us);
	return KTUNE_OK;
}
