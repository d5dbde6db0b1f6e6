/*
 * family.h -- what a kernel family tells the rest of ktune.
 *
 * A family is one operation with one reference (dense, lowrank, ...). A
 * variant is one algorithm for it; a config is one point of its parameter
 * space. This module is a leaf: it knows no database, no driver and no NVRTC.
 * Everything here is plain data plus pure functions, so the tuner, the worker
 * process, the server and the tests all read the same descriptor.
 *
 * Shapes and configs are fixed-size value arrays indexed by the family's
 * dims[] and params[]; their canonical text form ("tokens=1024,in=4096") is
 * the key used on the CLI, over HTTP and in the database.
 *
 * A candidate runs as a plan: NVRTC programs (a template plus -D defines),
 * optional untimed prep launches (offline weight transforms) and the timed
 * launches, in order. Arguments name buffers by index; the worker owns the
 * device memory.
 */
#ifndef KT_FAMILY_H
#define KT_FAMILY_H

#include <stddef.h>
#include <stdint.h>

#include "../util/err.h"

#define KT_MAX_DIMS 8
#define KT_MAX_PARAMS 20
#define KT_MAX_VALUES 12
#define KT_MAX_VARIANTS 12
#define KT_MAX_BUFS 10
#define KT_MAX_PROGRAMS 4
#define KT_MAX_DEFINES 24
#define KT_MAX_LAUNCHES 6
#define KT_MAX_ARGS 16
#define KT_NAME_MAX 64

struct kt_dim {
	const char *name;	/* "tokens", "in", ... */
	long min, max;		/* accepted range, inclusive */
	int structural;		/* 1: "nearest" lookups never cross it (blocks, rank) */
	const char *help;
};

struct kt_shape {
	long v[KT_MAX_DIMS];	/* indexed like family->dims */
};

struct kt_param {
	const char *name;	/* upper case, also the -D macro name: "BLOCK_M" */
	int nvalues;
	long values[KT_MAX_VALUES];
	uint32_t variants;	/* bit v set: variant v uses this parameter */
	const char *help;
	/* optional 1: a config key without this parameter (one stored before
	 * it existed: a database, an export, data/h200-results.json) parses
	 * with it at `absent`, which should be the value that does what the
	 * code did before. 0 (tables that leave both out): keys must name it.
	 * Give every parameter added to a shipped space optional 1. */
	int optional;
	long absent;
};

struct kt_config {
	int variant;		/* index into family->variants */
	long p[KT_MAX_PARAMS];	/* indexed like family->params; 0 where unused */
};

/* What the code is compiled for and must fit in. */
struct kt_target {
	int sm;			/* 80, 86, 89, 90 */
	int arch_a;		/* 1: sm_90a features (wgmma, setmaxnreg) allowed */
	int smem_optin;		/* max dynamic shared memory per block, bytes */
	int max_threads;	/* per block */
	int sms;		/* multiprocessors (0 when unknown: compile-only) */
	long l2_bytes;		/* 0 when unknown */
};

enum kt_dtype { KT_BF16 = 0, KT_F32 = 1, KT_I32 = 2 };
enum kt_buf_role { KT_BUF_INPUT = 0, KT_BUF_OUTPUT = 1, KT_BUF_SCRATCH = 2 };

struct kt_buf {
	char name[24];
	enum kt_buf_role role;
	enum kt_dtype dtype;
	size_t elems;
	double scale;		/* inputs: values uniform in (-scale, scale) */
	/* scratch only. prepared 1: a re-laid-out weight, written by the
	 * plan's prep launches from the weights alone (monarch's w1r, blast's
	 * St or S32): the runtime fills it once per weight (prepare_plan),
	 * not per call. zeroed 1: must hold zeros before the plan's launches
	 * (counters the kernels keep consistent from then on); the worker
	 * zeroes scratch once per candidate, the runtime at every call. */
	int prepared;
	int zeroed;
};

struct kt_program {
	const char *tpl;	/* template name: "gemm" for templates/gemm.cu */
	int ndefines;
	char defines[KT_MAX_DEFINES][48];	/* "BLOCK_M=128" (without -D) */
};

enum kt_arg_kind { KT_ARG_BUF = 0, KT_ARG_I32, KT_ARG_I64, KT_ARG_F32, KT_ARG_TMAP };

/* A TMA tensor map (sm_90) over buffer kt_arg.buf, built by the worker with
 * cuTensorMapEncodeTiled and passed by value (128 bytes, 64-byte aligned:
 * the kernel takes `const __grid_constant__ struct kt_tmap_t`). Dimension 0
 * is the contiguous one; element type is the buffer's dtype. */
struct kt_tmap {
	int rank;			/* 2 or 3 */
	long long dims[3];		/* elements per dimension */
	long long strides[3];		/* elements between consecutive indices of
					 * dims 1.. (strides[0] unused, must be 1) */
	int box[3];			/* box (shared-memory tile) per dimension */
	int swizzle;			/* 0, 32, 64 or 128 (bytes) */
};

struct kt_arg {
	enum kt_arg_kind kind;
	int buf;		/* KT_ARG_BUF / KT_ARG_TMAP: index into the buffer list */
	long long i;		/* KT_ARG_I32 / KT_ARG_I64 */
	float f;		/* KT_ARG_F32 */
	struct kt_tmap tmap;	/* KT_ARG_TMAP */
};

struct kt_launch {
	int program;		/* index into plan->programs */
	char kernel[KT_NAME_MAX];	/* extern "C" name */
	unsigned grid[3], block[3];
	unsigned smem;		/* dynamic shared memory, bytes */
	/* 1: a cooperative launch (cuLaunchCooperativeKernel). The kernel's
	 * CTAs wait for each other, which is safe only when the whole grid is
	 * resident at once; the driver refuses such a launch where it cannot
	 * be, instead of letting it hang. 0: an ordinary launch. */
	int cooperative;
	/* 1: launched with programmatic dependent launch (sm_90+): the kernel
	 * may start while the one before it still runs, so it must have been
	 * compiled with -DKT_PDL=1 (it waits in kt_pdl_wait before touching
	 * global memory); a pure speed hint, results are the same without.
	 * The worker launches a plan's first launch plainly (it follows the
	 * timer's flush); the flag still says how to run it after another
	 * layer, in an export. */
	int pdl;
	int nargs;
	struct kt_arg args[KT_MAX_ARGS];
};

struct kt_plan {
	int nprograms;
	struct kt_program programs[KT_MAX_PROGRAMS];
	int nprep;		/* untimed, run once before verification */
	struct kt_launch prep[KT_MAX_LAUNCHES];
	int nlaunch;		/* timed, in order: what a user runs */
	struct kt_launch launch[KT_MAX_LAUNCHES];
	char transform[256];	/* offline weight transform, "" if none */
};

struct kt_family {
	const char *name;
	const char *summary;
	int hidden;		/* test-only family: not listed, not in `families` */
	int ndims;
	const struct kt_dim *dims;
	int nvariants;
	const char *const *variants;
	uint32_t planted;	/* bit v: variant v is a planted failure (a kernel
				 * that faults or hangs on purpose), visited only
				 * when a sweep asks for planted candidates */
	int nparams;
	const struct kt_param *params;
	double tol;		/* relative L2 error allowed against the reference */

	/* The family's own data, for hooks that serve several families (one
	 * set of hooks for monarch and monarch_bm, for the attention forward
	 * and backward): what tells them apart. NULL where unused. */
	const void *priv;

	/* Every hook receives the family it was called through as f. */

	/* 0 if cfg can run shape on tgt; else 1 and a reason in why. Must
	 * reject configs whose shared memory or threads exceed tgt. */
	int (*check)(const struct kt_family *f, const struct kt_shape *s,
		     const struct kt_config *c, const struct kt_target *tgt, char *why,
		     size_t whylen);
	/* Problem buffers (cfg NULL) or problem + scratch buffers (cfg set);
	 * problem buffers always come first and in the same order. Returns
	 * the count. */
	int (*buffers)(const struct kt_family *f, const struct kt_shape *s,
		       const struct kt_config *cfg, struct kt_buf out[KT_MAX_BUFS]);
	/* The candidate's programs and launches. */
	int (*plan)(const struct kt_family *f, const struct kt_shape *s, const struct kt_config *c,
		    const struct kt_target *tgt, struct kt_plan *out, struct kt_err *err);
	/* The GPU reference: simple, obviously correct, writes the same
	 * output buffers. Uses problem buffers only. */
	int (*ref_plan)(const struct kt_family *f, const struct kt_shape *s,
			const struct kt_target *tgt, struct kt_plan *out, struct kt_err *err);
	/* CPU reference with double accumulation. in[] are host copies of the
	 * input buffers in buffer order (bf16 as uint16_t, i32 as int32_t);
	 * out[] receives each output buffer as float. */
	int (*cpu_ref)(const struct kt_family *f, const struct kt_shape *s, const void *const *in,
		       float *const *out, struct kt_err *err);
	/* Optional: fill input buffer `buf` on the host (NULL: kt_fill_bf16). */
	int (*fill)(const struct kt_family *f, const struct kt_shape *s, int buf, void *host,
		    uint64_t seed);
	double (*flops)(const struct kt_family *f, const struct kt_shape *s);
	double (*min_bytes)(const struct kt_family *f, const struct kt_shape *s);
	/* The config handed out when nothing is tuned for a device. */
	int (*default_config)(const struct kt_family *f, const struct kt_shape *s,
			      const struct kt_target *tgt, struct kt_config *out);
	/* Optional, for families with prepared buffers (kt_buf.prepared):
	 * every prepared buffer any config of the space may read at shape s
	 * (whatever its tokens) and a plan whose prep launches fill them all
	 * from the weights. Its buffer indices are those of buffers() (the
	 * problem's first) with bufs[] as given: the slots it fills are
	 * marked prepared, other scratch slots are unused. A config's
	 * prepared buffer has the name, dtype and size of the one of the same
	 * name here, so that one preparation serves every token count. */
	int (*prepare_plan)(const struct kt_family *f, const struct kt_shape *s,
			    const struct kt_target *tgt, struct kt_plan *out,
			    struct kt_buf bufs[KT_MAX_BUFS], int *nbufs, struct kt_err *err);
};

/* ---- registry ---- */
const struct kt_family *kt_family_find(const char *name);
int kt_family_count(void);			/* includes hidden ones */
const struct kt_family *kt_family_at(int i);

/* ---- shapes and configs as text ---- */
/* Parses "tokens=1024,in=4096,out=4096" (any order, every dim once).
 * Unknown key, missing key, non-number or out-of-range value: KT_EINVAL. */
int kt_shape_parse(const struct kt_family *f, const char *text,
		   struct kt_shape *out, struct kt_err *err);
/* Canonical key: dims in schema order. Returns length (snprintf style). */
int kt_shape_key(const struct kt_family *f, const struct kt_shape *s,
		 char *buf, size_t len);
/* "variant=fused,BLOCK_M=128,..." with only the params the variant uses. */
int kt_config_key(const struct kt_family *f, const struct kt_config *c,
		  char *buf, size_t len);
int kt_config_parse(const struct kt_family *f, const char *text,
		    struct kt_config *out, struct kt_err *err);
int kt_variant_index(const struct kt_family *f, const char *name);
/* Value of dim/param by name; -1 when the family has no such name. */
long kt_shape_get(const struct kt_family *f, const struct kt_shape *s,
		  const char *name);
long kt_config_get(const struct kt_family *f, const struct kt_config *c,
		   const char *name);

/* ---- enumeration ---- */
/* Calls fn for every config of the space (every variant -- planted ones
 * only when with_planted -- and the cartesian product of its params) in a
 * fixed order, valid or not; stops early when fn returns non-zero and
 * returns that value. */
int kt_space_foreach(const struct kt_family *f, int with_planted,
		     int (*fn)(const struct kt_config *c, void *arg), void *arg);
/* Number of configs kt_space_foreach visits. */
long kt_space_size(const struct kt_family *f, int with_planted);
/* 1 when c is one of the configs kt_space_foreach visits (a planted
 * variant counts): every parameter its variant uses holds one of the
 * listed values and every other is 0. What `ktune sweep --config` accepts,
 * so a config handed out (a default) should pass it. */
int kt_config_in_space(const struct kt_family *f, const struct kt_config *c);
/* The listed value of param i nearest v from below (the smallest listed
 * value when v is under all of them). */
long kt_param_clamp(const struct kt_family *f, int i, long v);

/* ---- targets ---- */
/* Known compile targets: "sm_80", "sm_86", "sm_89", "sm_90", "sm_90a". */
int kt_target_named(const char *name, struct kt_target *out);
/* "sm_90a" etc. for NVRTC's --gpu-architecture. */
void kt_target_arch(const struct kt_target *t, char *buf, size_t len);

/* ---- roofline ---- */
/* A device's ceilings: dense bf16 tensor-core FLOP/s and DRAM bytes/s. */
struct kt_peaks {
	double flops;
	double bytes;
};
/* The ceilings measured (bench/peaks.py) on the device the driver names
 * `device` ("NVIDIA H200"): 1. For a device not measured (or NULL): zeroes
 * and 0 -- another card's peaks would put its floors off by the ratio of
 * the two cards' rates. */
int kt_peaks_of(const char *device, struct kt_peaks *out);
/* The roofline floor of f at s on `device` (kt_peaks_of), microseconds:
 * max(flops / peak FLOP/s, min_bytes / peak bytes/s); 0 (unknown) on a
 * device not measured. Reports print an unknown floor as null / "unknown". */
double kt_floor_us(const struct kt_family *f, const struct kt_shape *s, const char *device);

/* ---- inputs ---- */
/* Deterministic counter-based value in (-scale, scale) for element i of a
 * tensor seeded with seed: the same on every host, never exactly zero
 * for all elements. */
float kt_fill_value(uint64_t seed, size_t i, double scale);
void kt_fill_bf16(uint16_t *dst, size_t n, uint64_t seed, double scale);
uint16_t kt_f32_to_bf16(float f);	/* round to nearest even */
float kt_bf16_to_f32(uint16_t h);
size_t kt_dtype_size(enum kt_dtype t);

/* 1 when a launch of plan p (prep or timed) takes buffer i, as a pointer
 * or a tensor map: the scratch a plan really uses (a family may list
 * scratch only some of its plans, or only its reference, read). */
int kt_plan_uses_buf(const struct kt_plan *p, int i);
/* 1 when a and b are the same program: template and defines, in order
 * (for one arch, the same compile). */
int kt_program_same(const struct kt_program *a, const struct kt_program *b);

/* Fills one buffer description (the rest of *b zeroed). */
void kt_buf_set(struct kt_buf *b, const char *name, enum kt_buf_role role, enum kt_dtype t,
		size_t elems, double scale);

#endif
