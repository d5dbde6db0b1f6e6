/*
 * jit_one.c -- NVRTC compiles of one template instance (jit_one.h).
 *
 * Every embedded template is handed to NVRTC as an includable header under
 * its file name, so templates share device code through #include. For the
 * same reason the cache key hashes the text of the whole template set, not
 * only the instantiated file: a change to common.cuh must never reuse a
 * binary compiled from the old one.
 *
 * NVRTC is dlopen'd on first use, so that a program (libktune with shipped
 * cubins) starts where it is not installed; only compiling then fails.
 */
#include "jit_one.h"

#include <dlfcn.h>
#include <stddef.h>
#include <nvrtc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../templates/templates.h"
#include "../util/hash.h"
#include "../util/clock.h"
#include "../util/knobs.h"

#ifndef KT_CUDA_HOME
#define KT_CUDA_HOME "/usr/local/cuda"
#endif

#define JIT_MAX_OPTS (KT_MAX_DEFINES + 8)

/* NVRTC's entry points, resolved by jit_setup (lib NULL: not found). */
static struct {
	void *lib;
	char why[300];
	nvrtcResult (*Version)(int *, int *);
	const char *(*GetErrorString)(nvrtcResult);
	nvrtcResult (*CreateProgram)(nvrtcProgram *, const char *, const char *, int,
				     const char *const *, const char *const *);
	nvrtcResult (*CompileProgram)(nvrtcProgram, int, const char *const *);
	nvrtcResult (*GetProgramLogSize)(nvrtcProgram, size_t *);
	nvrtcResult (*GetProgramLog)(nvrtcProgram, char *);
	nvrtcResult (*GetCUBINSize)(nvrtcProgram, size_t *);
	nvrtcResult (*GetCUBIN)(nvrtcProgram, char *);
	nvrtcResult (*DestroyProgram)(nvrtcProgram *);
} nv;

static pthread_once_t jit_once = PTHREAD_ONCE_INIT;
static char nvrtc_version[16];
static char templates_hash[33];
static char inc_cuda[512], inc_cccl[512];
static int nheaders;
static const char *header_src[64];
static const char *header_name[64];

/* Loads NVRTC: the sonames of CUDA 13 and 12, then the toolkit's lib64. */
static void nvrtc_load(const char *home)
{
	static const char *const names[] = { "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so" };
	static const struct {
		const char *name;
		size_t off;
	} syms[] = {
#define SYM(x) { "nvrtc" #x, offsetof(__typeof__(nv), x) }
		SYM(Version), SYM(GetErrorString), SYM(CreateProgram), SYM(CompileProgram),
		SYM(GetProgramLogSize), SYM(GetProgramLog), SYM(GetCUBINSize), SYM(GetCUBIN),
		SYM(DestroyProgram),
#undef SYM
	};
	char path[600];
	size_t i;

	for (i = 0; !nv.lib && i < sizeof(names) / sizeof(names[0]); i++)
		nv.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
	for (i = 0; !nv.lib && i < 2; i++) {
		snprintf(path, sizeof(path), "%s/lib64/%s", home, names[i]);
		nv.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	}
	if (!nv.lib) {
		snprintf(nv.why, sizeof(nv.why),
			 "NVRTC not found (libnvrtc.so.13 or .12, on the library path or in %s/lib64)",
			 home);
		return;
	}
	for (i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		void *fn = dlsym(nv.lib, syms[i].name);

		if (!fn) {
			snprintf(nv.why, sizeof(nv.why), "NVRTC lacks %s", syms[i].name);
			dlclose(nv.lib);
			nv.lib = NULL;
			return;
		}
		memcpy((char *)&nv + syms[i].off, &fn, sizeof(fn));
	}
}

static void jit_setup(void)
{
	const char *home = kt_knob_get(KT_KNOB_CUDA_HOME);
	const struct kt_template *t;
	struct kt_hash h;
	int major = 0, minor = 0;

	if (!home || !*home)
		home = KT_CUDA_HOME;
	snprintf(inc_cuda, sizeof(inc_cuda), "--include-path=%s/include", home);
	snprintf(inc_cccl, sizeof(inc_cccl), "--include-path=%s/include/cccl", home);
	nvrtc_load(home);
	if (nv.lib && nv.Version(&major, &minor) == NVRTC_SUCCESS)
		snprintf(nvrtc_version, sizeof(nvrtc_version), "%d.%d", major, minor);
	else
		snprintf(nvrtc_version, sizeof(nvrtc_version), "unknown");

	kt_hash_init(&h);
	for (t = kt_templates; t->name && nheaders < 64; t++) {
		const char *base = strrchr(t->path, '/');

		header_name[nheaders] = base ? base + 1 : t->path;
		header_src[nheaders] = t->text;
		nheaders++;
		kt_hash_str(&h, header_name[nheaders - 1]);
		kt_hash_update(&h, t->text, t->len);
	}
	kt_hash_hex(&h, templates_hash);
}

const char *jit_nvrtc_version(void)
{
	pthread_once(&jit_once, jit_setup);
	return nvrtc_version;
}

const char *jit_templates_hash(void)
{
	pthread_once(&jit_once, jit_setup);
	return templates_hash;
}

void jit_result_release(struct jit_result *r)
{
	if (!r)
		return;
	free(r->cubin);
	free(r->log);
	memset(r, 0, sizeof(*r));
}

/* The options of one compile, in a fixed order; they are also what the key
 * hashes, so the key changes whenever the command line would. */
static int jit_options(const struct kt_program *p, const char *arch, char arch_opt[64],
		       char def_opts[][56], const char *opts[JIT_MAX_OPTS])
{
	int n = 0, i;

	snprintf(arch_opt, 64, "--gpu-architecture=%s", arch);
	opts[n++] = arch_opt;
	opts[n++] = "-std=c++17";
	opts[n++] = inc_cuda;
	opts[n++] = inc_cccl;
	for (i = 0; i < p->ndefines && i < KT_MAX_DEFINES; i++) {
		snprintf(def_opts[i], 56, "-D%s", p->defines[i]);
		opts[n++] = def_opts[i];
	}
	return n;
}

static int arch_ok(const char *arch)
{
	size_t i;

	if (!arch || strncmp(arch, "sm_", 3) != 0 || strlen(arch) > 8)
		return 0;
	for (i = 3; arch[i]; i++)
		if (!(arch[i] >= '0' && arch[i] <= '9') && !(arch[i] == 'a' && arch[i + 1] == 0))
			return 0;
	return strlen(arch) > 4;
}

int jit_key(const struct kt_program *p, const char *arch, char out[33], struct kt_err *err)
{
	char arch_opt[64], def_opts[KT_MAX_DEFINES][56];
	const char *opts[JIT_MAX_OPTS];
	struct kt_hash h;
	int n, i;

	pthread_once(&jit_once, jit_setup);
	if (!p || !p->tpl || !kt_template_find(p->tpl))
		return kt_err_set(err, KT_EINTERNAL, "unknown template '%s'",
				  p && p->tpl ? p->tpl : "(null)");
	if (!arch_ok(arch))
		return kt_err_set(err, KT_EINVAL, "bad architecture '%s' (want sm_NN or sm_NNa)",
				  arch ? arch : "(null)");
	n = jit_options(p, arch, arch_opt, def_opts, opts);
	kt_hash_init(&h);
	kt_hash_str(&h, templates_hash);
	kt_hash_str(&h, nvrtc_version);
	kt_hash_str(&h, p->tpl);
	for (i = 0; i < n; i++)
		kt_hash_str(&h, opts[i]);
	kt_hash_hex(&h, out);
	return 0;
}

int jit_compile(const struct kt_program *p, const char *arch, struct jit_result *r,
		struct kt_err *err)
{
	char arch_opt[64], def_opts[KT_MAX_DEFINES][56];
	const char *opts[JIT_MAX_OPTS];
	const struct kt_template *t;
	nvrtcProgram prog = NULL;
	nvrtcResult rc, crc;
	size_t log_len = 0, bin_len = 0;
	double t0 = (kt_clock_s() * 1e3);
	int n, ret = -1;

	memset(r, 0, sizeof(*r));
	if (jit_key(p, arch, r->key, err) != 0)
		return -1;
	if (!nv.lib)
		return kt_err_set(err, KT_ECOMPILE, "%s", nv.why);
	t = kt_template_find(p->tpl);
	n = jit_options(p, arch, arch_opt, def_opts, opts);
	rc = nv.CreateProgram(&prog, t->text, t->path, nheaders, header_src, header_name);
	if (rc != NVRTC_SUCCESS) {
		kt_err_set(err, KT_ECOMPILE, "nvrtcCreateProgram(%s): %s", p->tpl,
			   nv.GetErrorString(rc));
		goto out;
	}
	crc = nv.CompileProgram(prog, n, opts);
	if (crc != NVRTC_SUCCESS && crc != NVRTC_ERROR_COMPILATION) {
		kt_err_set(err, KT_ECOMPILE, "nvrtcCompileProgram(%s): %s", p->tpl,
			   nv.GetErrorString(crc));
		goto out;
	}
	/* The log is kept also on success: warnings matter. */
	if ((rc = nv.GetProgramLogSize(prog, &log_len)) != NVRTC_SUCCESS) {
		kt_err_set(err, KT_ECOMPILE, "nvrtcGetProgramLogSize: %s", nv.GetErrorString(rc));
		goto out;
	}
	if (log_len > 1) {
		if (!(r->log = malloc(log_len))) {
			kt_err_set(err, KT_EINTERNAL, "out of memory for an NVRTC log");
			goto out;
		}
		if ((rc = nv.GetProgramLog(prog, r->log)) != NVRTC_SUCCESS) {
			kt_err_set(err, KT_ECOMPILE, "nvrtcGetProgramLog: %s", nv.GetErrorString(rc));
			goto out;
		}
	}
	if (crc == NVRTC_SUCCESS) {
		if ((rc = nv.GetCUBINSize(prog, &bin_len)) != NVRTC_SUCCESS) {
			kt_err_set(err, KT_ECOMPILE, "nvrtcGetCUBINSize: %s", nv.GetErrorString(rc));
			goto out;
		}
		if (bin_len == 0) {
			kt_err_set(err, KT_ECOMPILE, "NVRTC made no CUBIN for %s (is '%s' a real "
				   "architecture?)", p->tpl, arch);
			goto out;
		}
		if (!(r->cubin = malloc(bin_len))) {
			kt_err_set(err, KT_EINTERNAL, "out of memory for a CUBIN");
			goto out;
		}
		if ((rc = nv.GetCUBIN(prog, r->cubin)) != NVRTC_SUCCESS) {
			kt_err_set(err, KT_ECOMPILE, "nvrtcGetCUBIN: %s", nv.GetErrorString(rc));
			goto out;
		}
		r->cubin_len = bin_len;
		r->ok = 1;
	}
	ret = 0;
out:
	r->ms = (kt_clock_s() * 1e3) - t0;
	if (prog && (rc = nv.DestroyProgram(&prog)) != NVRTC_SUCCESS && ret == 0)
		ret = kt_err_set(err, KT_ECOMPILE, "nvrtcDestroyProgram: %s", nv.GetErrorString(rc));
	if (ret != 0) {
		char key[33];

		memcpy(key, r->key, sizeof(key));
		jit_result_release(r);
		memcpy(r->key, key, sizeof(key));
	}
	return ret;
}
