/*
 * kdigest.c -- a digest of every kernel binary that a fixed set of configs
 * compiles to. Identical CUBINs run identically, so two commits whose lists
 * match changed no kernel: what proves a template or planner restructuring
 * behaviour-preserving on a machine without a GPU. tools/same_kernels.sh
 * builds this at two commits and compares their lists.
 *
 *   kdigest [--sample N] [--arch LIST] [--family NAME] [--winners EXPORT.json]
 *           [--threads N]
 *
 * The configs: for every development-suite workload of a family ktune has
 * (tuner/suite.c), at each arch of LIST (default sm_90a,sm_80), the GPU
 * reference, the family's default config, and per variant the first and
 * last valid config and N (default 4) seeded samples of the valid ones;
 * with --winners, every entry of a JSON export (data/h200-results.json)
 * at sm_90a. Each plan's programs are compiled with NVRTC; one line a
 * program, sorted:
 *     FAMILY SHAPE ARCH CONFIG #PROGRAM TEMPLATE DIGEST
 * where DIGEST is the CUBIN's content hash, or FAIL and the reason. Exit 0
 * when every line was written (failed compiles included: they are part of
 * what is compared), 2 on bad usage or input.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/family.h"
#include "tuner/jit.h"
#include "tuner/suite.h"
#include "util/hash.h"

#define MAX_ARCHS 4

struct entry {
	char head[448];		/* FAMILY SHAPE ARCH CONFIG */
	int program;		/* -1: the plan failed */
	struct kt_program prog;
	char arch[16];
	char fail[600];		/* plan failure: no compile */
};

struct list {
	struct entry *e;
	int n, cap;
};

static struct entry *list_add(struct list *l)
{
	if (l->n == l->cap) {
		int cap = l->cap ? l->cap * 2 : 256;
		struct entry *n = realloc(l->e, sizeof(*n) * (size_t)cap);

		if (!n)
			return NULL;
		l->e = n;
		l->cap = cap;
	}
	memset(&l->e[l->n], 0, sizeof(l->e[0]));
	return &l->e[l->n++];
}

/* Queues every program of one plan (or its failure) under `what`. */
static int add_plan(struct list *l, const struct kt_family *f, const struct kt_shape *s,
		    const struct kt_target *t, const struct kt_config *c, const char *what)
{
	struct kt_plan plan;
	struct kt_err err = { 0 };
	char shape[160], key[256], arch[16];
	struct entry *e;
	int rc, i;

	kt_target_arch(t, arch, sizeof(arch));
	if (kt_shape_key(f, s, shape, sizeof(shape)) >= (int)sizeof(shape) ||
	    (c && kt_config_key(f, c, key, sizeof(key)) >= (int)sizeof(key)))
		return -1;
	memset(&plan, 0, sizeof(plan));
	rc = c ? f->plan(f, s, c, t, &plan, &err) : f->ref_plan(f, s, t, &plan, &err);
	if (rc != 0 || plan.nprograms == 0) {
		if (!(e = list_add(l)))
			return -1;
		snprintf(e->head, sizeof(e->head), "%s %s %s %s", f->name, shape, arch,
			 c ? key : what);
		e->program = -1;
		snprintf(e->fail, sizeof(e->fail), "plan: %s", rc ? err.msg : "no programs");
		kt_err_clear(&err);
		return 0;
	}
	for (i = 0; i < plan.nprograms; i++) {
		if (!(e = list_add(l)))
			return -1;
		snprintf(e->head, sizeof(e->head), "%s %s %s %s", f->name, shape, arch,
			 c ? key : what);
		e->program = i;
		e->prog = plan.programs[i];
		snprintf(e->arch, sizeof(e->arch), "%s", arch);
	}
	return 0;
}

struct pick {
	const struct kt_family *f;
	const struct kt_shape *s;
	const struct kt_target *t;
	int variant;
	struct kt_config *valid;
	long n, cap;
};

static int pick_valid(const struct kt_config *c, void *arg)
{
	struct pick *p = arg;
	char why[256];

	if (c->variant != p->variant || p->f->check(p->f, p->s, c, p->t, why, sizeof(why)))
		return 0;
	if (p->n == p->cap) {
		long cap = p->cap ? p->cap * 2 : 1024;
		struct kt_config *n = realloc(p->valid, sizeof(*n) * (size_t)cap);

		if (!n)
			return -1;
		p->valid = n;
		p->cap = cap;
	}
	p->valid[p->n++] = *c;
	return 0;
}

/* The reference, the default and per variant first, last and `sample`
 * seeded picks of one (family, shape, target). */
static int add_workload(struct list *l, const struct kt_family *f, const struct kt_shape *s,
			const struct kt_target *t, int sample)
{
	struct kt_config dflt;
	uint64_t rng = 0x6b64696765737431ull;	/* fixed: the same sample every run */
	int v, i;

	if (add_plan(l, f, s, t, NULL, "reference") != 0)
		return -1;
	if (f->default_config(f, s, t, &dflt) == 0 && add_plan(l, f, s, t, &dflt, NULL) != 0)
		return -1;
	for (v = 0; v < f->nvariants; v++) {
		struct pick p = { f, s, t, v, NULL, 0, 0 };

		if (f->planted & (1u << v))
			continue;
		if (kt_space_foreach(f, 0, pick_valid, &p) != 0) {
			free(p.valid);
			return -1;
		}
		if (p.n > 0 && (add_plan(l, f, s, t, &p.valid[0], NULL) != 0 ||
				(p.n > 1 && add_plan(l, f, s, t, &p.valid[p.n - 1], NULL) != 0))) {
			free(p.valid);
			return -1;
		}
		for (i = 0; i < sample && p.n > 2; i++)
			if (add_plan(l, f, s, t, &p.valid[1 + kt_splitmix64(&rng) % (uint64_t)(p.n - 2)],
				     NULL) != 0) {
				free(p.valid);
				return -1;
			}
		free(p.valid);
	}
	return 0;
}

/* Every entry of a JSON export, at sm_90a. */
static int add_winners(struct list *l, const char *path, const char *only)
{
	json_error_t jerr;
	json_t *doc = json_load_file(path, 0, &jerr), *entries, *it;
	struct kt_target t;
	size_t i;
	int rc = 0;

	if (!doc) {
		fprintf(stderr, "kdigest: %s: %s (line %d)\n", path, jerr.text, jerr.line);
		return -1;
	}
	entries = json_object_get(doc, "entries");
	if (!json_is_array(entries) || kt_target_named("sm_90a", &t) != 0) {
		fprintf(stderr, "kdigest: %s: no \"entries\" array\n", path);
		json_decref(doc);
		return -1;
	}
	json_array_foreach(entries, i, it) {
		const char *fam = json_string_value(json_object_get(it, "family"));
		const char *shape = json_string_value(json_object_get(it, "shape_key"));
		const char *key = json_string_value(json_object_get(it, "config_key"));
		const struct kt_family *f = fam ? kt_family_find(fam) : NULL;
		struct kt_err err = { 0 };
		struct kt_shape s;
		struct kt_config c;

		if (!f || !shape || !key) {
			fprintf(stderr, "kdigest: %s: entry %zu: no known family, shape_key and "
				"config_key\n", path, i);
			rc = -1;
			break;
		}
		if (only && strcmp(only, f->name) != 0)
			continue;
		if (kt_shape_parse(f, shape, &s, &err) != 0 || kt_config_parse(f, key, &c, &err) != 0) {
			fprintf(stderr, "kdigest: %s: entry %zu: %s\n", path, i, err.msg);
			kt_err_clear(&err);
			rc = -1;
			break;
		}
		if (add_plan(l, f, &s, &t, &c, NULL) != 0) {
			rc = -1;
			break;
		}
	}
	json_decref(doc);
	return rc;
}

static int cmp_line(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* --help: to stdout, exit 0; bad usage: to stderr, exit 2. */
static int usage(FILE *to, int rc)
{
	fprintf(to, "usage: kdigest [--sample N] [--arch sm_90a,sm_80] [--family NAME] "
			"[--winners EXPORT.json] [--threads N]\n"
			"A content hash of every kernel binary the development suite's reference,\n"
			"default and sampled configs (and an export's winners) compile to, one\n"
			"line a program, sorted: tools/same_kernels.sh compares two commits.\n");
	return rc;
}

static long num_arg(const char *s, long lo, long hi)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	return errno || end == s || *end || v < lo || v > hi ? -1 : v;
}

int main(int argc, char **argv)
{
	const char *archs = "sm_90a,sm_80", *only = NULL, *winners = NULL;
	char archbuf[64], *tok, *save = NULL, **lines = NULL;
	struct list l = { 0 };
	struct jit_job *jobs = NULL;
	long sample = 4, threads = 0;
	int i, rc = 2, nlines = 0;

	for (i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(argv[i], "--help") == 0)
			return usage(stdout, 0);
		if (!v)
			return usage(stderr, 2);
		if (strcmp(argv[i], "--sample") == 0 && (sample = num_arg(v, 0, 1000)) >= 0)
			i++;
		else if (strcmp(argv[i], "--threads") == 0 && (threads = num_arg(v, 0, 256)) >= 0)
			i++;
		else if (strcmp(argv[i], "--arch") == 0)
			archs = argv[++i];
		else if (strcmp(argv[i], "--family") == 0)
			only = argv[++i];
		else if (strcmp(argv[i], "--winners") == 0)
			winners = argv[++i];
		else
			return usage(stderr, 2);
	}
	if (only && !kt_family_find(only)) {
		fprintf(stderr, "kdigest: no family '%s' (ktune families)\n", only);
		return 2;
	}
	snprintf(archbuf, sizeof(archbuf), "%s", archs);
	for (tok = strtok_r(archbuf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		struct kt_target t;
		const struct suite_workload *w;

		if (kt_target_named(tok, &t) != 0) {
			fprintf(stderr, "kdigest: unknown arch '%s' (sm_80, sm_86, sm_90, sm_90a)\n", tok);
			goto out;
		}
		for (w = suite_dev; w->id; w++) {
			const struct kt_family *f = kt_family_find(w->family);
			struct kt_err err = { 0 };
			struct kt_shape s;

			if (!f || (only && strcmp(only, f->name) != 0))
				continue;
			if (kt_shape_parse(f, w->shape, &s, &err) != 0) {
				fprintf(stderr, "kdigest: %s: %s\n", w->id, err.msg);
				kt_err_clear(&err);
				goto out;
			}
			if (add_workload(&l, f, &s, &t, (int)sample) != 0)
				goto oom;
		}
	}
	if (winners && add_winners(&l, winners, only) != 0)
		goto out;

	jobs = calloc((size_t)l.n + 1, sizeof(*jobs));
	lines = calloc((size_t)l.n + 1, sizeof(*lines));
	if (!jobs || !lines)
		goto oom;
	{
		int nj = 0, *job_of = calloc((size_t)l.n + 1, sizeof(int));

		if (!job_of)
			goto oom;
		for (i = 0; i < l.n; i++) {
			int k;

			job_of[i] = -1;
			if (l.e[i].program < 0)
				continue;
			for (k = 0; k < nj; k++)	/* the same program compiles once */
				if (strcmp(jobs[k].arch, l.e[i].arch) == 0 &&
				    kt_program_same(jobs[k].prog, &l.e[i].prog))
					break;
			if (k == nj) {
				jobs[nj].prog = &l.e[i].prog;
				jobs[nj].arch = l.e[i].arch;
				nj++;
			}
			job_of[i] = k;
		}
		fprintf(stderr, "kdigest: compiling %d programs\n", nj);
		jit_compile_all(jobs, nj, (int)threads);
		for (i = 0; i < l.n; i++) {
			const struct entry *e = &l.e[i];
			char digest[300], line[1200];

			if (job_of[i] < 0) {
				snprintf(digest, sizeof(digest), "FAIL %.200s", e->fail);
			} else {
				const struct jit_job *j = &jobs[job_of[i]];

				if (j->failed || !j->res.ok) {
					const char *why = j->failed ? j->err_msg : j->res.log;
					const char *err = why ? strstr(why, "error") : NULL;

					while (err && err > why && err[-1] != '\n')
						err--;	/* from the line's start: file(line) */

					snprintf(digest, sizeof(digest), "FAIL compile: %.200s",
						 err ? err : why ? why : "NVRTC refused the program");
				} else {
					struct kt_hash h;

					kt_hash_init(&h);
					kt_hash_update(&h, j->res.cubin, j->res.cubin_len);
					kt_hash_hex(&h, digest);
				}
			}
			for (char *p = digest; *p; p++)
				if (*p == '\n')
					*p = ' ';
			snprintf(line, sizeof(line), "%s #%d %s %s", e->head, e->program < 0 ? 0 : e->program,
				 e->program < 0 ? "-" : e->prog.tpl, digest);
			if (!(lines[nlines] = strdup(line))) {
				free(job_of);
				goto oom;
			}
			nlines++;
		}
		for (i = 0; i < nj; i++)
			jit_result_release(&jobs[i].res);
		free(job_of);
	}
	qsort(lines, (size_t)nlines, sizeof(*lines), cmp_line);
	for (i = 0; i < nlines; i++)
		printf("%s\n", lines[i]);
	rc = fflush(stdout) == 0 ? 0 : 2;
	goto out;
oom:
	fprintf(stderr, "kdigest: out of memory\n");
	rc = 2;
out:
	for (i = 0; i < nlines; i++)
		free(lines[i]);
	free(lines);
	free(jobs);
	free(l.e);
	return rc;
}
