/*
 * plan_emu.h -- what the family test programs share beyond testutil.h:
 *
 *  - a host emulator of launch plans: it runs a plan's launches (prep, then
 *    timed) on fp32 copies of the config's buffers. It knows the GEMM
 *    template's kernels -- gemm_tn, gemm_tn_ws (operands read through the
 *    TMAP args' geometry with the copy engine's zero fill, k-tiles of 64,
 *    split-K slices into the fp32 workspace, the PERSISTENT walk of work
 *    items tile by tile, each once), splitk_reduce and lowrank_fused --
 *    each mirrored from templates/gemm.cu with its alignment rules, grid,
 *    block and boxes and the worker's tensor-map check asserted, and
 *    ref.cu's ref_gemm_tn. A family's own kernels plug in through a
 *    dispatch callback: attention's, monarch's and blast's are here
 *    (emu_blockattn, emu_monarch, emu_blast). Every access is
 *    bounds-checked (oob counts the misses); every buffer that is not an
 *    input starts as NaN (device memory is not cleared either); bf16
 *    stores round like the GPU's when asked.
 *    emu_rel_l2 and emu_nonfinite judge what it returns.
 *  - an NVRTC compile-job list: programs of plans, deduplicated per
 *    architecture, compiled in one jit_compile_all, every result asserted;
 *    job_add_shape queues a family's valid configs of a shape (all, or
 *    each variant's extremes and a fixed-seed sample) and its reference.
 */
#ifndef KT_PLAN_EMU_H
#define KT_PLAN_EMU_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/family.h"
#include "kernels/gemm_plan.h"
#include "tuner/jit.h"

struct emu;

/* A family's kernels: runs launch l and returns 1, or returns 0 when l is
 * not one of its kernels (the emulator then tries the GEMM template's). It
 * may also check a GEMM launch further and return 0. */
typedef int (*emu_family_fn)(struct emu *m, const struct kt_launch *l);

struct emu {
	const struct kt_plan *plan;
	int nb;
	struct kt_buf bufs[KT_MAX_BUFS];
	float *d[KT_MAX_BUFS];
	int round;		/* 1: bf16 stores rounded like the GPU's */
	long oob;		/* out-of-bounds accesses seen */
	long unknown;		/* launches of kernels the emulator lacks */
	const char *tpl;	/* the family's template: its "<tpl>_" kernels come from it */
	emu_family_fn family;	/* may be NULL */
};

/* Element i of buffer buf (0 and counted when outside it). */
float emu_ld(struct emu *m, int buf, long long i);
/* An L2 discard (common.cuh's kt_l2_discard) of the 64 bf16 elements of
 * buf from i, a whole 128-byte line: they become NaN, so that a launch
 * that reads them later spoils y (asserted: inside buf, 64-aligned). */
void emu_discard(struct emu *m, int buf, long long i);
/* A TMA read: element (c0, c1, c2) of map arg a, zero outside its dims
 * (the copy engine's fill), else through its strides (bounds-checked). */
double emu_tma_ld(struct emu *m, const struct kt_arg *a, long long c0, long long c1,
		  long long c2);
/* Stores v (rounded to bf16 for bf16 buffers when m->round). */
void emu_st(struct emu *m, int buf, long long i, double v);
/* Launch argument k: a scalar / a buffer index (asserted). */
long long emu_ai(const struct kt_launch *l, int k);
int emu_ab(const struct kt_launch *l, int k);
/* The value of define name=... of program p, -1 without it. */
long emu_define(const struct kt_program *p, const char *name);

/* For a family whose gemm_tn_ws maps cover exactly its operands: map arg a
 * (batch coordinate z * zm, zm 2: (k, batch, rows)) spans K along dim 0,
 * rows along its rows dimension and nz batches. */
void emu_map_extent(const struct kt_arg *a, long long zm, long long rows, long long K,
		    long long nz);

/* Asserts that launch argument a is a rank-3 tensor map the worker accepts
 * over its buffer, with box (b0, b1, b2) and a swizzle of swz bytes (what a
 * kernel's shared-memory layouts assume). */
void emu_map_ok(struct emu *m, const struct kt_arg *a, int b0, int b1, int b2, int swz);

/* Runs one launch: the common checks (program index, grid, block, a
 * "<tpl>_" kernel from the family's template), then the family's callback,
 * then the GEMM template's kernels; else counts it unknown. */
void emu_launch(struct emu *m, const struct kt_launch *l);

/* Runs plan (prep, then timed launches) of config c of family f on shape s:
 * buffer k starts as in[k] (bf16 bits) where in[k] is not NULL (k < nin),
 * else NaN; tpl and family as in struct emu. Asserts that no launch was
 * unknown; *oob gets the misses.
 * Returns buffer y's final contents (malloc'ed, the caller frees). */
float *emu_run(const struct kt_family *f, const struct kt_shape *s, const struct kt_config *c,
	       const struct kt_plan *plan, uint16_t *const *in, int nin, int y, int round,
	       const char *tpl, emu_family_fn family, long *oob);

/* The same over explicit buffers (libktune's plans size them for the real
 * shape): buffer k starts as in[k] (floats; I32 buffers hold integers)
 * where given (k < nin), else NaN; launches i with run[i] == 0 are skipped
 * (run NULL: all). out[k] gets every buffer's final contents (malloc'ed,
 * the caller frees each). */
void emu_run_all(const struct kt_plan *plan, const struct kt_buf *bufs, int nb,
		 const float *const *in, int nin, const int *run, int round, const char *tpl,
		 emu_family_fn family, float **out, long *oob);

/* Jagged block attention's kernels (blockattn_blocks, the forward and
 * backward of every variant), as a family callback: each work item in
 * double, the walk of items per CTA as the templates have it, BOUND's
 * count included. */
int emu_blockattn(struct emu *m, const struct kt_launch *l);

/* monarch.cu's and monarch_fused.cu's kernels (plan_emu_monarch.c), its
 * gemm_tn_ws maps' strides asserted increasing. */
int emu_monarch(struct emu *m, const struct kt_launch *l);
/* Controls planted in them, which a test that can fail must catch (0:
 * none): 1 in emu_monarch_x8_swap makes monarch_perm_x8's transpose take
 * each chunk's element u ^ 1 (the halves of __byte_perm swapped); in
 * emu_monarch_e3_swap the same in fused_ws's EPILOGUE 3 interleave; in
 * emu_monarch_e3_nowait each CTA of EPILOGUE 3 interleaves right after its
 * own y2 store, without waiting for the other CTAs of its token tile. */
extern int emu_monarch_x8_swap, emu_monarch_e3_swap, emu_monarch_e3_nowait;

/* blast.cu's, blast_fused.cu's and blast_s1tc.cu's kernels
 * (plan_emu_blast.c), its gemm_tn_ws maps' extents asserted. */
int emu_blast(struct emu *m, const struct kt_launch *l);

/* sqrt(|a - b|^2 / |b|^2) in double (1e30 for b = 0 unless a = b too;
 * NaN where a holds one). */
double emu_rel_l2(const float *a, const float *b, size_t n);
/* How many of y[0..n) are NaN or infinite. */
int emu_nonfinite(const float *y, size_t n);

/* ---- NVRTC compile jobs ---- */

struct job_list {
	struct kt_program *progs;
	char (*arch)[16];
	char (*label)[200];
	int n, cap;
	struct jit_job *jobs;	/* after job_list_compile */
	/* set by job_list_compile under KTUNE_COMPILE_SHARD: only that shard
	 * is left in the list, so counts over it say nothing of the whole */
	int sharded;
};

/* Adds p for arch unless the same program (template and defines) is there
 * for arch already. */
void job_add(struct job_list *j, const struct kt_program *p, const char *arch, const char *label);
/* Adds every program of family f's plan of config c (asserted to plan). */
void job_add_plan(struct job_list *j, const struct kt_family *f, const struct kt_shape *s,
		  const struct kt_config *c, const struct kt_target *t, const char *why);
/* How a family's space is sampled for compiling (job_add_shape). */
struct job_sample {
	const struct kt_family *f;
	int (*only_90a)(int variant);	/* 1: the variant compiles for sm_90a only */
	/* the GEMM tile that stands for config c's smem / register extremes */
	void (*tile)(const struct kt_config *c, struct kt_gemm_tile *t);
	int (*samples)(int variant);	/* random configs per variant besides the extremes */
	uint64_t *rng;			/* the sample's state (fixed seed: the same every run) */
	/* optional: 1 when variant v has no config at s by design (a shape its
	 * kernel refuses), so that none is not a failure */
	int (*unsupported)(int variant, const struct kt_shape *s);
};

/* Queues the valid configs of shape s on target t (sm_90a-only variants on
 * sm_90a only, and there only them unless all; each variant must have one
 * unless js->unsupported says otherwise): every one when all, else
 * each variant's extremes (first, last, max smem, max acc, min / max
 * threads) and js->samples(v) drawn at random; then the reference plan's
 * programs. */
void job_add_shape(struct job_list *j, const struct job_sample *js, const struct kt_shape *s,
		   const struct kt_target *t, int all);

/* KTUNE_COMPILE_SHARD over a list of n programs: 0 when none is asked for
 * (*first 0, *step 1); 1 when one is (printed with how many it keeps); -1,
 * asserted and printed, for a bad value, with *step 0 so nothing is kept. */
int job_shard(int n, int *first, int *step);
/* Keeps elements first, first + step, ... of the n elements of `size` bytes
 * at a, moved to its front; returns how many (0 for step 0). */
int shard_keep(void *a, size_t size, int n, int first, int step);

/* jit_compile_all over n jobs, one core each; from 1,000 jobs on (a
 * whole-space compile runs for many minutes) in 20 rounds, each followed by
 * a progress line on stderr: how many, the time so far and an estimate of
 * what is left. */
void jobs_compile(struct jit_job *jobs, int n);

/* Compiles every job (jit_compile_all), asserting and printing each
 * failure, each program whose wgmmas ptxas serialized and each sm_90a
 * program with a stack frame (a spill; other targets' are printed only);
 * returns how many compiled. job_ok(j, k) says whether job k did.
 * Under KTUNE_COMPILE_SHARD=K/N the list first keeps only its jobs K, K + N,
 * ... (j->sharded set); a bad value is a failure and compiles nothing. */
int job_list_compile(struct job_list *j);
int job_ok(const struct job_list *j, int k);
void job_list_release(struct job_list *j);

#endif
