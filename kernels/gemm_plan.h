/*
 * gemm_plan.h -- launch planning for the GEMM template (templates/gemm.cu),
 * shared by every family whose stages are TN GEMMs (dense, lowrank, and
 * later monarch and blast batches).
 *
 * A struct kt_gemm_tile is one point of the GEMM parameter space. The
 * functions here turn it into the compile defines, the resource estimate
 * used to prune before compiling, and the launch of one (batched) GEMM
 * C[z] = A[z] . B[z]^T. Pure functions over plain data, like family.h.
 */
#ifndef KT_GEMM_PLAN_H
#define KT_GEMM_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "family.h"

struct kt_gemm_tile {
	long bm, bn, bk;	/* CTA tile */
	long wm, wn;		/* warp split: wm x wn warps */
	long stages;		/* cp.async pipeline depth */
	long group_m;		/* L2 tile-order group; 1 = plain */
	long wgmma;		/* 1: the sm_90a warpgroup-MMA path (-DWGMMA=1):
				 * bk = 64, bm / 64 warpgroups of 4 warps
				 * (wm = bm / 16, wn = 1) */
	long split_k;		/* > 1: K split over grid.y into an fp32
				 * workspace, then splitk_reduce (0 or 1: off);
				 * also on the ws path (batch 1, no cluster) */
	/* Added for the warp-specialized sm_90a kernel (gemm_tn_ws, -DWS=1);
	 * zero leaves a tile on the paths above. */
	long ws;		/* 1: TMA + mbarrier ring, one producer warpgroup,
				 * `consumers` wgmma warpgroups; A and B reach the
				 * kernel as KT_ARG_TMAP tensor maps; bk = 64 */
	long consumers;		/* consumer warpgroups, 1 or 2 (0: 1); each owns
				 * bm / consumers rows */
	long epi_direct;	/* 1: store bf16 pairs from the accumulators
				 * (0: staged through shared memory, 16-byte
				 * stores; the faster) */
	long cluster_m;		/* 2: CTA pairs along M share B by TMA multicast
				 * (0 or 1: off; in no space, see gemm.cu) */
	long row_batches;	/* 1: kt_gemm_launch maps an operand whose batches
				 * sit side by side within each row (K <= batch
				 * stride < ld, batch * stride <= ld) as (k, batch,
				 * rows), zA / zB = 2, keeping the map's strides
				 * increasing (monarch's x); 0: (k, rows, batch) */
	long persistent;	/* > 0: the persistent ws kernel (-DPERSISTENT=1)
				 * with this many CTAs (the caller sets it, e.g.
				 * kt_target.sms; more than the work items are
				 * clamped, so with sms = 0 one per item is still
				 * correct), each walking (tile, batch) work items;
				 * with the staged epilogue it stages in its own
				 * area after the ring, bm x min(bn, 128) bf16
				 * (kt_gemm_smem). ws only, not
				 * with split_k or cluster_m. 0: one CTA per tile */
	long split_cluster;	/* 1 (ws, split_k 2, staged epilogue, no
				 * cluster_m, not persistent): -DSPLIT_CLUSTER=1,
				 * the K slices of a tile are a (1, 2, 1)
				 * cluster that reduce-scatters the fp32
				 * fragments through distributed shared memory,
				 * each slice storing its share of bf16 C: no
				 * workspace, no splitk_reduce launch */
	long col_group;		/* > 0 (no split-K; ws: the staged epilogue): -DCOLGRP:
				 * output column c lands at (c / col_group) *
				 * col_gstride + c % col_group of its row (groups
				 * of col_group % 8 == 0 columns col_gstride
				 * elements apart); 0: plain */
	long col_gstride;
	long col_step;		/* > 1 (gemm_tn, no split-K, no col_group):
				 * -DCOLSTEP: output column c lands at c *
				 * col_step of its row, 2-byte stores (ldc and
				 * the batch stride of C need no alignment) */
	long pdl;		/* 1: -DKT_PDL=1 and the launch flagged pdl
				 * (family.h): programmatic dependent launch,
				 * gemm_tn_ws waits for the previous kernel in
				 * kt_pdl_wait (sm_90a). gemm_tn (mma.sync,
				 * sm_90+) also -DPDL_PREFETCH=1: it
				 * loads B's first stages before that wait, so
				 * B must not be the previous kernel's output;
				 * a plan may clear the first launch's flag and
				 * keep the program (it then lets its dependent
				 * start early and waits for nothing) */
	long l2;		/* ws only: -DL2_HINT bits (templates/gemm.cu):
				 * 1 A's loads evict_first, 2 B's, 4 C's stores
				 * evict_last; 0: none */
	long pingpong;		/* > 0: the ping-pong ws kernel (-DPINGPONG=1,
				 * templates/gemm_pingpong.cuh) with this many
				 * CTAs, set by the caller as persistent's (more
				 * than the work items are clamped): a persistent
				 * walk whose two consumer warpgroups (consumers
				 * 2) each own whole bm x bn tiles (bm 64 or 128)
				 * and take turns, so one's epilogue overlaps the
				 * other's main loop; C leaves through TMA stores
				 * (a third tensor map, over bufC), staged in two
				 * bm x bn areas after the ring (kt_gemm_smem).
				 * ws only, staged epilogue, not with split_k,
				 * cluster_m, persistent or column remaps. 0: off */
};

/* The CTAs of a persistent or ping-pong walk on tgt: one per SM; with an
 * unknown SM count (NULL or sms 0: compile-only) 1 << 30, which the launch
 * clamps to the work items (one CTA per item, still correct). */
long kt_gemm_walk_ctas(const struct kt_target *tgt);

/* Fills t from the config params named BLOCK_M, BLOCK_N, BLOCK_K, WARPS_M,
 * WARPS_N, STAGES, GROUP_M, SPLIT_K (absent: 1); a variant named "wgmma"
 * gets the warpgroup tile (BLOCK_K and warps derived); a variant whose name
 * ends in "_ws" the warp-specialized one (ws = 1, CONSUMERS, absent: 1).
 * -1 when a needed param is missing (planted variants). */
int kt_gemm_tile_from(const struct kt_family *f, const struct kt_config *c,
		      struct kt_gemm_tile *t);

/* Fills t with a plain tile: the given sizes, GROUP_M group_m (<= 0: 1),
 * split_k 1, the rest 0; with wgmma, the warpgroup tile (kt_gemm_tile_wg). */
void kt_gemm_tile_set(struct kt_gemm_tile *t, long bm, long bn, long bk, long wm, long wn,
		      long stages, long group_m, int wgmma);
/* The warpgroup tile that wgmma and the warp-specialized path use: BLOCK_K
 * 64 and 64 rows per warpgroup (warps derived from BLOCK_M). */
void kt_gemm_tile_wg(struct kt_gemm_tile *t);

/* Dynamic shared memory of the main loop, bytes. */
unsigned kt_gemm_smem(const struct kt_gemm_tile *t);
unsigned kt_gemm_threads(const struct kt_gemm_tile *t);
/* fp32 accumulators per thread (BLOCK_M*BLOCK_N / threads). */
long kt_gemm_acc_regs(const struct kt_gemm_tile *t);
/* Estimated registers per thread: accumulators, double-buffered fragments,
 * addressing. Rough, but it orders configs the way ptxas does. */
long kt_gemm_reg_estimate(const struct kt_gemm_tile *t);

/* 0 when tile t can run an M x N x K GEMM on tgt (extra_smem bytes of
 * shared memory besides the main loop's); else 1 and why. Checks the
 * tile's own rules (warp tiles of 16 x 16 multiples, BLOCK_K 32 or 64,
 * threads, shared memory, registers), the alignment the template needs
 * (N and K multiples of 8) and prunes tiles more than twice the problem
 * in M or N (a smaller tile does the same work with less waste). */
int kt_gemm_check(const struct kt_gemm_tile *t, long M, long N, long K, unsigned extra_smem,
		  const struct kt_target *tgt, char *why, size_t whylen);
/* kt_gemm_check plus the families' rule for their spaces: rings deeper
 * than 5 only for tiles of at most 32 rows (the decode tiles). */
int kt_gemm_check_space(const struct kt_gemm_tile *t, long M, long N, long K,
			unsigned extra_smem, const struct kt_target *tgt, char *why, size_t whylen);

/* Appends BLOCK_M=... STAGES, GROUP_M defines to p (tpl left as is). */
int kt_gemm_defines(const struct kt_gemm_tile *t, struct kt_program *p);
/* 1 when tiles a and b compile to the same gemm program (kt_gemm_defines
 * gives both the same defines), so that two GEMM stages may share it. */
int kt_gemm_same_program(const struct kt_gemm_tile *a, const struct kt_gemm_tile *b);
int kt_program_define(struct kt_program *p, const char *name, long value);

/* The launch of gemm_tn from program `program`: C = A . B^T over `batch`
 * batches; buffers by index, leading dimensions and batch strides in
 * elements. A ws tile launches gemm_tn_ws instead: A and B become rank-3
 * tensor maps (k, rows, batch) over bufA / bufB with boxes (64, bm, 1) and
 * (64, bn / cluster_m, 1), 128-byte swizzle (a batch stride of 0 with
 * batch > 1 maps one batch and passes zA / zB = 0), then C, M, N, K, ldc,
 * sC, zA, zB. A persistent tile (t->persistent > 0) gets grid
 * (min(persistent, tiles * batch), 1, 1) and one more argument, the batch
 * count. A ping-pong tile (t->pingpong > 0) launches gemm_tn_ws(tA, tB,
 * tC, M, N, K, zA, zB, batch) on grid (min(pingpong, tiles * batch), 1,
 * 1): tC is a rank-3 map over bufC (N, M, batch) with strides ldc and sC
 * (M * ldc for one batch), box (64, bm, 1), 128-byte swizzle, and the
 * kernel writes C only through it. With t->row_batches, batches side by side within each row
 * (K <= stride < ld, batch * stride <= ld: monarch's x) get the map
 * (k, batch, rows), box (64, 1, rows), and zA / zB = 2, so that the
 * strides stay increasing. */
void kt_gemm_launch(const struct kt_gemm_tile *t, int program, long M, long N, long K,
		    int bufA, long lda, long sA, int bufB, long ldb, long sB,
		    int bufC, long ldc, long sC, long batch, struct kt_launch *out);

/* Elements of the fp32 split-K workspace for an M x N GEMM (0 when off). */
size_t kt_gemm_workspace(const struct kt_gemm_tile *t, long M, long N);
/* The launches of C = A . B^T (batch 1): gemm_tn alone, or with split-K
 * gemm_tn into workspace buffer bufW and splitk_reduce into C (ldc); a ws
 * tile the same with gemm_tn_ws (-DSPLIT_K with -DWS), or with split_cluster
 * gemm_tn_ws alone, writing C itself.
 * Returns the number of launches written to out (1 or 2). */
int kt_gemm_launches(const struct kt_gemm_tile *t, int program, long M, long N, long K,
		     int bufA, long lda, int bufB, long ldb, int bufC, long ldc, int bufW,
		     struct kt_launch out[2]);

/* Argument helpers for launch builders. */
void kt_launch_arg_buf(struct kt_launch *l, int buf);
void kt_launch_arg_i32(struct kt_launch *l, long long v);
void kt_launch_arg_i64(struct kt_launch *l, long long v);
/* An element-wise kernel's launch (blast.cu's, monarch.cu's): program
 * `program`, kernel `kernel`, KT_ELEM_THREADS threads per CTA and one
 * thread per work item of `total`, the grid capped at KT_ELEM_MAX_GRID
 * (at least 1), so the kernels' grid-stride loops take the rest. *l is
 * reset first; returns l for the arguments. */
#define KT_ELEM_THREADS 256
#define KT_ELEM_MAX_GRID (1L << 20)
struct kt_launch *kt_launch_elem(struct kt_launch *l, int program, const char *kernel,
				 long long total);
/* A rank-3 tensor map argument over buf: dims and strides in elements
 * (dimension 0 contiguous, stride 1), box, 128-byte swizzle. */
void kt_launch_arg_tmap3(struct kt_launch *l, int buf, long long d0, long long d1, long long d2,
			 long long s1, long long s2, int b0, int b1, int b2);

/* The GPU reference GEMM of templates/ref.cu: one thread per element of
 * C = A . B^T, fp32 accumulation; A and C bf16, or fp32 when a_f32 / c_f32. */
void kt_ref_gemm_launch(int program, long M, long N, long K, int bufA, int a_f32, int bufB,
			int bufC, int c_f32, struct kt_launch *l);

/* The GPU reference of the same stage for all N rows: kernel `kernel` of
 * program `program` (monarch.cu's monarch_ref_z, blast.cu's blast_ref_z:
 * one thread per z32 element, (x, w, z32, N, n, b, r)), z32 (b, N, r) fp32. */
void kt_ref_block_gemm_launch(struct kt_launch *l, int program, const char *kernel, long N,
			      long n, long b, long r, int bufX, int bufW, int bufZ32);

/* The CPU reference of a block-diagonal batched GEMM for row t of x (N x
 * n, bf16): z[j*r + c] = sum_k x[t][j*nb + k] * w[j][c][k] over the b
 * blocks (nb = n / b, w (b, r, nb) bf16), accumulated in double (monarch's
 * and blast's stage 1). */
void kt_cpu_block_gemm_row(const uint16_t *x, const uint16_t *w, long t, long n, long b, long r,
			   double *z);

/* A robust tile for an M x N x K GEMM on tgt, as the 7 values BLOCK_M,
 * BLOCK_N, BLOCK_K, WARPS_M, WARPS_N, STAGES, GROUP_M: the first of a short
 * list, best first, that fits and fills the machine. -1 if none fits. */
int kt_gemm_default(long M, long N, long K, const struct kt_target *tgt, long p[7]);

/* The default config of a family whose GEMM stages share one tile plus a
 * stage-1 N tile (monarch, blast): variant `variant` with the tile of
 * kt_gemm_default(M, N, K), then two small fallback tiles, and the largest
 * stage-1 N tile of 256, 128, 64, 32 that f->check accepts; each value
 * kept to one the family lists (kt_param_clamp), so the default is in the
 * family's space. idx holds the
 * family's param indices of BLOCK_M, BLOCK_N, BLOCK_K, WARPS_M, WARPS_N,
 * STAGES, GROUP_M and Z_BLOCK_N. 0, or -1 when nothing fits. */
int kt_gemm_default_staged(const struct kt_family *f, const struct kt_shape *s,
			   const struct kt_target *tgt, long M, long N, long K, int variant,
			   const int idx[8], struct kt_config *out);

#endif
