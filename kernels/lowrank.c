/*
 * lowrank.c -- the `lowrank` family: y = (x V^T) U^T with V (rank x in),
 * U (out x rank); x (tokens x in), y (tokens x out), bf16, fp32 accumulate.
 *
 * Variants:
 *   unfused  two launches of the GEMM template: z = x V^T into a bf16
 *            scratch (tokens x rank), then y = z U^T. The first GEMM has its
 *            own tile (Z_BLOCK_M x Z_BLOCK_N; its N is rank, usually much
 *            smaller than out, so it wants smaller tiles to fill the GPU);
 *            warps, BLOCK_K, STAGES and GROUP_M are shared. PDL 1 (sm_90):
 *            the y GEMM (and a split z's reduce) go out as programmatic
 *            dependents, y loading its first U stages before it waits.
 *            sm_90's default for 64 tokens or fewer (lowrank_default_decode).
 *   fused    one kernel (gemm.cu with -DRANK): the BLOCK_M x rank
 *            intermediate stays in shared memory; N_SPLIT CTAs share a token
 *            tile, each recomputing z for its share of the out columns.
 *            Only for rank <= 256 (z and its stage-1 accumulators must fit).
 *   unfused_wgmma  the unfused pair on sm_90a's warpgroup MMA (64-row
 *            warpgroups, BLOCK_K 64; WARPS_* and BLOCK_K do not apply).
 *   unfused_ws  the unfused pair on sm_90a's warp-specialized kernel
 *            (gemm_tn_ws: TMA into an mbarrier ring, a producer warpgroup,
 *            CONSUMERS wgmma warpgroups, both stages; x, V, z and U reach it
 *            as tensor maps). Z_SPLIT_K splits the z GEMM's K (in) over
 *            grid.y: its tokens x rank grid (1024 x 1024: 64 tiles of 128 x
 *            128) leaves half of an H200 idle. Two slices of a tile are
 *            a (1, 2, 1) cluster that reduce-scatters through
 *            distributed shared memory (gemm.cu's SPLIT_CLUSTER: no
 *            workspace, no reduce launch, which is what makes the split
 *            pay); four go through an fp32 workspace + splitk_reduce.
 *            docs/families/lowrank.md says where each variant wins.
 *
 * Shape: tokens 1..2^20; in, out 16..65536, rank 8..65536 (rank structural),
 * all of in, out, rank multiples of 8 (check() rejects others).
 */
#include "family.h"
#include "gemm_plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { D_TOKENS, D_IN, D_OUT, D_RANK };
enum { V_UNFUSED, V_FUSED, V_UNFUSED_WGMMA, V_UNFUSED_WS };
enum { B_X, B_V, B_U, B_Y, B_Z32, B_Z, B_ZWS };
enum { P_BM, P_BN, P_BK, P_WM, P_WN, P_STAGES, P_GROUP, P_ZBM, P_ZBN, P_ZSPLIT, P_NSPLIT,
       P_CONS, P_PDL };

#define FUSED_MAX_RANK 256

static const struct kt_dim dims[] = {
	{"tokens", 1, 1L << 20, 0, "rows of x (batch x sequence)"},
	{"in", 16, 65536, 0, "input features; a multiple of 8"},
	{"out", 16, 65536, 0, "output features; a multiple of 8"},
	{"rank", 8, 65536, 1, "inner rank r; a multiple of 8"},
};

/* new variants go last: stored configs keep their variant index */
static const char *const variants[] = {"unfused", "fused", "unfused_wgmma", "unfused_ws"};

#define UNF (1u << V_UNFUSED)
#define FUS (1u << V_FUSED)
#define UWG (1u << V_UNFUSED_WGMMA)
#define UWS (1u << V_UNFUSED_WS)

static const struct kt_param params[] = {
	{"BLOCK_M", 5, {16, 32, 64, 128, 256}, UNF | FUS | UWG | UWS,
	 "token tile (y GEMM; fused: both)"},
	{"BLOCK_N", 4, {32, 64, 128, 256}, UNF | FUS | UWG | UWS, "out tile of the y GEMM"},
	{"BLOCK_K", 2, {32, 64}, UNF | FUS, "k-tile per pipeline stage"},
	{"WARPS_M", 3, {1, 2, 4}, UNF | FUS, "warps along tokens"},
	{"WARPS_N", 2, {2, 4}, UNF | FUS, "warps along out / rank"},
	{"STAGES", 4, {3, 4, 6, 8}, UNF | FUS | UWG | UWS, "cp.async pipeline (ws: TMA ring) depth"},
	{"GROUP_M", 1, {8}, UNF | UWG | UWS, "tile rows walked together for L2 reuse"},
	{"Z_BLOCK_M", 4, {16, 32, 64, 128}, UNF | UWG | UWS, "token tile of the z = x V^T GEMM"},
	{"Z_BLOCK_N", 4, {32, 64, 128, 256}, UNF | UWG | UWS, "rank tile of the z = x V^T GEMM"},
	{"Z_SPLIT_K", 3, {1, 2, 4}, UNF | UWG | UWS,
	 "K slices of the z GEMM (its rank x tokens grid is small)"},
	{"N_SPLIT", 5, {1, 2, 4, 8, 16}, FUS, "CTAs sharing a token tile (each recomputes z)"},
	{"CONSUMERS", 2, {1, 2}, UWS,
	 "unfused_ws: consumer warpgroups per CTA (each BLOCK_M/CONSUMERS rows), both stages"},
	/* optional: keys from before it mean two plain launches */
	{"PDL", 2, {0, 1}, UNF,
	 "unfused (sm_90+): 1 the y GEMM (and a split z GEMM's reduce) are programmatic "
	 "dependent launches; y loads its first U stages while z finishes; 0 plain launches",
	 1, 0},
};

static void tiles_of(const struct kt_config *c, struct kt_gemm_tile *y, struct kt_gemm_tile *z)
{
	memset(y, 0, sizeof(*y));
	y->bm = c->p[P_BM];
	y->bn = c->p[P_BN];
	y->bk = c->p[P_BK];
	y->wm = c->p[P_WM];
	y->wn = c->p[P_WN];
	y->stages = c->p[P_STAGES];
	y->group_m = c->p[P_GROUP] > 0 ? c->p[P_GROUP] : 1;
	y->split_k = 1;
	*z = *y;
	z->bm = c->p[P_ZBM];
	z->bn = c->p[P_ZBN];
	z->split_k = c->p[P_ZSPLIT] > 0 ? c->p[P_ZSPLIT] : 1;
	/* PDL 1: both programs with gemm.cu's PDL prologue (V and U, the B
	 * operands, are nobody's output); lowrank_plan flags y's launch only */
	y->pdl = z->pdl = c->variant == V_UNFUSED && c->p[P_PDL] == 1;
	if (c->variant == V_UNFUSED_WGMMA) {
		/* warpgroup tiles: BLOCK_K 64, 64 rows per warpgroup */
		y->wgmma = z->wgmma = 1;
		y->bk = z->bk = 64;
		y->wm = y->bm / 16;
		z->wm = z->bm / 16;
		y->wn = z->wn = 1;
	}
	if (c->variant == V_UNFUSED_WS) {
		/* warp-specialized tiles: BLOCK_K 64, the TMA producer + CONSUMERS
		 * warpgroups (wm, wn as kt_gemm_tile_from sets them) */
		y->ws = z->ws = 1;
		/* programmatic dependent launch: each of the two or three
		 * kernels (z, the split-K reduce, y) starts while the one
		 * before drains, and waits in kt_pdl_wait before reading */
		y->pdl = z->pdl = 1;
		/* a z GEMM split in two reduces in its cluster (no workspace,
		 * no splitk_reduce launch); four slices go through the
		 * workspace, since clusters of four do not all fit at once
		 * (docs/families/lowrank.md) */
		z->split_cluster = z->split_k == 2;
		y->consumers = z->consumers = c->p[P_CONS] > 0 ? c->p[P_CONS] : 1;
		y->bk = z->bk = 64;
		y->wm = y->bm / 16;
		z->wm = z->bm / 16;
		y->wn = z->wn = 1;
	}
}

static int is_unfused(int variant)
{
	return variant == V_UNFUSED || variant == V_UNFUSED_WGMMA || variant == V_UNFUSED_WS;
}

/* Fused: stage 1 is a BLOCK_M x rank GEMM over in, whose ring the U tiles
 * of stage 2 reuse, beside the resident bf16 z tile. */
static unsigned fused_smem(const struct kt_config *c, long R)
{
	long ring1 = c->p[P_STAGES] * (c->p[P_BM] + R) * c->p[P_BK] * 2;
	long ring2 = c->p[P_STAGES] * c->p[P_BN] * c->p[P_BK] * 2;

	return (unsigned)(c->p[P_BM] * R * 2 + (ring1 > ring2 ? ring1 : ring2));
}

#define WHY(...) (snprintf(why, whylen, __VA_ARGS__), 1)

static int fused_check(const struct kt_shape *s, const struct kt_config *c,
		       const struct kt_target *tgt, char *why, size_t whylen)
{
	struct kt_gemm_tile y, z;
	long R = s->v[D_RANK], tn;
	unsigned smem = fused_smem(c, R);

	tiles_of(c, &y, &z);
	z = y;
	z.bn = R;
	if (R > FUSED_MAX_RANK)
		return WHY("fused needs rank <= %d, rank is %ld", FUSED_MAX_RANK, R);
	if (R % 16 || R % y.bk || R % (y.wn * 16))
		return WHY("rank %ld must be a multiple of BLOCK_K=%ld and of 16*WARPS_N=%ld", R, y.bk,
			   16 * y.wn);
	/* The stage-1 tile (BLOCK_M x rank) under the same warps, its ring
	 * replaced in the count by the real total below. */
	if (kt_gemm_check_space(&z, s->v[D_TOKENS], R, s->v[D_IN], 0, tgt, why, whylen))
		return 1;
	if (kt_gemm_check_space(&y, s->v[D_TOKENS], s->v[D_OUT], R, 0, tgt, why, whylen))
		return 1;
	if (smem > (unsigned)tgt->smem_optin)
		return WHY("shared memory %u B (z tile + ring) > %d B opt-in limit", smem,
			   tgt->smem_optin);
	tn = (s->v[D_OUT] + y.bn - 1) / y.bn;
	if (c->p[P_NSPLIT] < 1 || c->p[P_NSPLIT] > tn)
		return WHY("N_SPLIT=%ld outside 1..%ld (out tiles)", c->p[P_NSPLIT], tn);
	return 0;
}

static int lowrank_check(const struct kt_family *f, const struct kt_shape *s,
			 const struct kt_config *c, const struct kt_target *tgt, char *why,
			 size_t whylen)
{
	struct kt_gemm_tile y, z;
	long T = s->v[D_TOKENS], n = s->v[D_IN], m = s->v[D_OUT], R = s->v[D_RANK];

	if (c->variant == V_FUSED)
		return fused_check(s, c, tgt, why, whylen);
	if (!is_unfused(c->variant))
		return WHY("unknown variant %d", c->variant);
	tiles_of(c, &y, &z);
	if (kt_gemm_check_space(&z, T, R, n, 0, tgt, why, whylen))
		return 1;
	return kt_gemm_check_space(&y, T, m, R, 0, tgt, why, whylen);
}

static int lowrank_buffers(const struct kt_family *f, const struct kt_shape *s,
			   const struct kt_config *cfg, struct kt_buf out[KT_MAX_BUFS])
{
	size_t T = (size_t)s->v[D_TOKENS], n = (size_t)s->v[D_IN], m = (size_t)s->v[D_OUT];
	size_t R = (size_t)s->v[D_RANK];

	/* scales keep z and y O(1) whatever in and rank are */
	kt_buf_set(&out[B_X], "x", KT_BUF_INPUT, KT_BF16, T * n, 1.0);
	kt_buf_set(&out[B_V], "V", KT_BUF_INPUT, KT_BF16, R * n, 1.0 / sqrt((double)n));
	kt_buf_set(&out[B_U], "U", KT_BUF_INPUT, KT_BF16, m * R, 1.0 / sqrt((double)R));
	kt_buf_set(&out[B_Y], "y", KT_BUF_OUTPUT, KT_BF16, T * m, 0);
	/* the GPU reference's fp32 intermediate: a problem buffer */
	kt_buf_set(&out[B_Z32], "z32", KT_BUF_SCRATCH, KT_F32, T * R, 0);
	if (cfg && is_unfused(cfg->variant)) {
		struct kt_gemm_tile y, z;
		size_t ws;

		kt_buf_set(&out[B_Z], "z", KT_BUF_SCRATCH, KT_BF16, T * R, 0);
		tiles_of(cfg, &y, &z);
		if ((ws = kt_gemm_workspace(&z, (long)T, (long)R)) > 0) {
			kt_buf_set(&out[B_ZWS], "splitk_ws", KT_BUF_SCRATCH, KT_F32, ws, 0);
			return 7;
		}
		return 6;
	}
	return 5;
}

static int lowrank_plan(const struct kt_family *f, const struct kt_shape *s,
			const struct kt_config *c, const struct kt_target *tgt, struct kt_plan *out,
			struct kt_err *err)
{
	struct kt_gemm_tile y, z;
	char why[160];
	long T = s->v[D_TOKENS], n = s->v[D_IN], m = s->v[D_OUT], R = s->v[D_RANK];

	memset(out, 0, sizeof(*out));
	if (lowrank_check(f, s, c, tgt, why, sizeof(why)))
		return kt_err_set(err, KT_EINVAL, "lowrank: config cannot run: %s", why);
	tiles_of(c, &y, &z);
	if (is_unfused(c->variant)) {
		int same = kt_gemm_same_program(&z, &y);

		out->nprograms = same ? 1 : 2;
		out->programs[0].tpl = "gemm";
		if (kt_gemm_defines(&z, &out->programs[0]))
			return kt_err_set(err, KT_EINTERNAL, "lowrank: too many defines");
		if (!same) {
			out->programs[1].tpl = "gemm";
			if (kt_gemm_defines(&y, &out->programs[1]))
				return kt_err_set(err, KT_EINTERNAL, "lowrank: too many defines");
		}
		out->nlaunch = kt_gemm_launches(&z, 0, T, R, n, B_X, n, B_V, n, B_Z, R, B_ZWS,
						 out->launch);
		/* unfused PDL: z is the first launch after the timer's L2
		 * flush (its prologue would read V before waiting), so only y
		 * goes out as a dependent */
		if (c->variant == V_UNFUSED)
			out->launch[0].pdl = 0;
		kt_gemm_launch(&y, same ? 0 : 1, T, m, R, B_Z, R, 0, B_U, R, 0, B_Y, m, 0, 1,
			       &out->launch[out->nlaunch++]);
		return 0;
	}
	{
		struct kt_program *p = &out->programs[0];
		struct kt_launch *l = &out->launch[0];

		out->nprograms = 1;
		p->tpl = "gemm";
		if (kt_gemm_defines(&y, p) || kt_program_define(p, "RANK", R))
			return kt_err_set(err, KT_EINTERNAL, "lowrank: too many defines");
		out->nlaunch = 1;
		snprintf(l->kernel, sizeof(l->kernel), "lowrank_fused");
		l->grid[0] = (unsigned)((T + y.bm - 1) / y.bm);
		l->grid[1] = (unsigned)c->p[P_NSPLIT];
		l->grid[2] = 1;
		l->block[0] = kt_gemm_threads(&y);
		l->block[1] = l->block[2] = 1;
		l->smem = fused_smem(c, R);
		kt_launch_arg_buf(l, B_X);
		kt_launch_arg_buf(l, B_V);
		kt_launch_arg_buf(l, B_U);
		kt_launch_arg_buf(l, B_Y);
		kt_launch_arg_i32(l, T);
		kt_launch_arg_i32(l, n);
		kt_launch_arg_i32(l, m);
	}
	return 0;
}

static int lowrank_ref_plan(const struct kt_family *f, const struct kt_shape *s,
			    const struct kt_target *tgt, struct kt_plan *out, struct kt_err *err)
{
	long T = s->v[D_TOKENS], n = s->v[D_IN], m = s->v[D_OUT], R = s->v[D_RANK];

	memset(out, 0, sizeof(*out));
	out->nprograms = 1;
	out->programs[0].tpl = "ref";
	out->nlaunch = 2;
	kt_ref_gemm_launch(0, T, R, n, B_X, 0, B_V, B_Z32, 1, &out->launch[0]);
	kt_ref_gemm_launch(0, T, m, R, B_Z32, 1, B_U, B_Y, 0, &out->launch[1]);
	(void)tgt;
	(void)err;
	return 0;
}

static int lowrank_cpu_ref(const struct kt_family *f, const struct kt_shape *s,
			   const void *const *in, float *const *out, struct kt_err *err)
{
	const uint16_t *x = in[B_X], *V = in[B_V], *U = in[B_U];
	long T = s->v[D_TOKENS], n = s->v[D_IN], m = s->v[D_OUT], R = s->v[D_RANK];
	long t, r, o, k;
	double *z = malloc(sizeof(double) * (size_t)R);

	if (!z)
		return kt_err_set(err, KT_EINTERNAL, "lowrank: out of memory for the reference");
	for (t = 0; t < T; t++) {
		for (r = 0; r < R; r++) {
			double acc = 0;

			for (k = 0; k < n; k++)
				acc += (double)kt_bf16_to_f32(x[t * n + k]) *
				       (double)kt_bf16_to_f32(V[r * n + k]);
			z[r] = acc;
		}
		for (o = 0; o < m; o++) {
			double acc = 0;

			for (r = 0; r < R; r++)
				acc += z[r] * (double)kt_bf16_to_f32(U[o * R + r]);
			out[0][t * m + o] = (float)acc;
		}
	}
	free(z);
	return 0;
}

static double lowrank_flops(const struct kt_family *f, const struct kt_shape *s)
{
	return 2.0 * s->v[D_TOKENS] * s->v[D_RANK] * (double)(s->v[D_IN] + s->v[D_OUT]);
}

static double lowrank_min_bytes(const struct kt_family *f, const struct kt_shape *s)
{
	double T = s->v[D_TOKENS], n = s->v[D_IN], m = s->v[D_OUT], R = s->v[D_RANK];

	return 2.0 * (T * n + R * (n + m) + T * m);
}

extern const struct kt_family lowrank_family;

/* Whether the y GEMM's grid on a bm x bn tile fills half the SMs: the sm_90a
 * defaults' rule for a tile big enough without idling the machine. */
static int y_fills_half(const struct kt_shape *s, const struct kt_target *tgt, const long tile[2])
{
	long T = s->v[D_TOKENS], m = s->v[D_OUT];
	long sms = tgt->sms > 0 ? tgt->sms : 132;

	return 2 * ((T + tile[0] - 1) / tile[0]) * ((m + tile[1] - 1) / tile[1]) >= sms;
}

/* sm_90a where a warp-specialized y tile fills half the machine: the
 * unfused pair on the ws GEMM (two consumer warpgroups), y on the first
 * such tile of the list (fastest first), z on 128 x 128 unsplit; it beat
 * the wgmma default below where both were timed (docs/families/lowrank.md). */
static int lowrank_default_ws(const struct kt_family *f, const struct kt_shape *s,
			      const struct kt_target *tgt, struct kt_config *out)
{
	static const long ytiles[][2] = {{128, 256}, {256, 128}, {128, 128}};
	char why[160], key[200];
	struct kt_err e = { 0 };
	size_t i;

	for (i = 0; i < sizeof(ytiles) / sizeof(ytiles[0]); i++) {
		if (!y_fills_half(s, tgt, ytiles[i]))
			continue;
		snprintf(key, sizeof(key),
			 "variant=unfused_ws,BLOCK_M=%ld,BLOCK_N=%ld,STAGES=4,GROUP_M=8,Z_BLOCK_M=128,"
			 "Z_BLOCK_N=128,Z_SPLIT_K=1,CONSUMERS=2", ytiles[i][0], ytiles[i][1]);
		if (kt_config_parse(&lowrank_family, key, out, &e) == 0 &&
		    lowrank_check(f, s, out, tgt, why, sizeof(why)) == 0)
			return 0;
	}
	return -1;
}

/* sm_90a otherwise: the unfused pair on warpgroup MMA, y on the largest
 * tile that fills half the machine, z (a small tokens x rank grid) split
 * along K (once verified; see NEEDSWORK below). */
static int lowrank_default_wgmma(const struct kt_family *f, const struct kt_shape *s,
				 const struct kt_target *tgt, struct kt_config *out)
{
	static const long ytiles[][2] = {{256, 128}, {128, 256}, {128, 128}, {128, 64}, {64, 64}};
	static const long ztiles[][2] = {{128, 128}, {128, 64}, {64, 64}};
	long T = s->v[D_TOKENS], R = s->v[D_RANK];
	char why[160];
	size_t i, j;

	for (i = 0; i < sizeof(ytiles) / sizeof(ytiles[0]); i++) {
		if (!y_fills_half(s, tgt, ytiles[i]) && i + 1 < sizeof(ytiles) / sizeof(ytiles[0]))
			continue;
		for (j = 0; j < sizeof(ztiles) / sizeof(ztiles[0]); j++) {
			long zt = ((T + ztiles[j][0] - 1) / ztiles[j][0]) *
				  ((R + ztiles[j][1] - 1) / ztiles[j][1]);

			memset(out, 0, sizeof(*out));
			out->variant = V_UNFUSED_WGMMA;
			out->p[P_BM] = ytiles[i][0];
			out->p[P_BN] = ytiles[i][1];
			out->p[P_STAGES] = 4;
			out->p[P_GROUP] = 8;
			out->p[P_ZBM] = ztiles[j][0];
			out->p[P_ZBN] = ztiles[j][1];
			/* NEEDSWORK: the z GEMM wants Z_SPLIT_K (its grid is
			 * small) but split-K has not been verified on a GPU
			 * yet; the default stays unsplit until it has been. */
			out->p[P_ZSPLIT] = 1;
			(void)zt;
			if (lowrank_check(f, s, out, tgt, why, sizeof(why)) == 0)
				return 0;
		}
	}
	return -1;
}

/* sm_90, 64 tokens or fewer. The tiles came from random samples of
 * unfused (16 tokens) and of unfused + unfused_wgmma (64) at llama7b
 * q/k/v/o (rank 1024), with PDL 1: 32-wide y and z tiles on an 8-deep
 * ring, each GEMM's CTAs streaming their weights with more bytes in flight
 * (docs/families/lowrank.md, bench/results/lowrank_decode.json). The z
 * GEMM (tokens x rank, K = in) splits K in 4;
 * where that is refused (a grid that fills the GPU already, or too few
 * k-tiles a slice) in 2, then not. */
static int lowrank_default_decode(const struct kt_family *f, const struct kt_shape *s,
				  const struct kt_target *tgt, struct kt_config *out)
{
	static const char *const tile[2] = {
		"variant=unfused,BLOCK_M=16,BLOCK_N=32,BLOCK_K=64,WARPS_M=1,WARPS_N=2,STAGES=8,"
		"GROUP_M=8,Z_BLOCK_M=16,Z_BLOCK_N=32,PDL=1",
		"variant=unfused,BLOCK_M=32,BLOCK_N=32,BLOCK_K=64,WARPS_M=1,WARPS_N=2,STAGES=8,"
		"GROUP_M=8,Z_BLOCK_M=32,Z_BLOCK_N=32,PDL=1",
	};
	char why[160], key[200];
	struct kt_err e = { 0 };
	long split;

	for (split = 4; split >= 1; split /= 2) {
		snprintf(key, sizeof(key), "%s,Z_SPLIT_K=%ld", tile[s->v[D_TOKENS] > 32], split);
		if (kt_config_parse(&lowrank_family, key, out, &e) == 0 &&
		    lowrank_check(f, s, out, tgt, why, sizeof(why)) == 0)
			return 0;
	}
	return -1;
}

/* The mma.sync pair from the GEMM list's tiles (dense's: its STAGES 5
 * is not one of lowrank's), each parameter kept to a value the space
 * lists when clamp is set (the largest not above it, else the smallest),
 * so that `ktune sweep --config` can verify the default. */
static int lowrank_default_mma(const struct kt_family *f, const struct kt_shape *s,
			       const struct kt_target *tgt, int clamp, struct kt_config *out)
{
	/* BLOCK_M, BLOCK_N, BLOCK_K, WARPS_M, WARPS_N, STAGES: small rank (the
	 * y tile must also fit rank as the z tile's N) */
	static const long fallback[][6] = {{64, 64, 32, 2, 2, 3}, {64, 64, 32, 2, 2, 2}};
	long T = s->v[D_TOKENS], n = s->v[D_IN], m = s->v[D_OUT], R = s->v[D_RANK];
	long zp[7];
	char why[160];
	size_t i;
	int k;

	memset(out, 0, sizeof(*out));
	out->variant = V_UNFUSED;
	if (kt_gemm_default(T, m, R, tgt, out->p) || kt_gemm_default(T, R, n, tgt, zp))
		return -1;
	out->p[P_GROUP] = 8;
	out->p[P_ZSPLIT] = 1;
	out->p[P_ZBM] = zp[0];
	out->p[P_ZBN] = zp[1];
	/* the defaults list shares warps only when the two tiles agree on them;
	 * else fall back to the y tile for both stages */
	if (zp[3] != out->p[P_WM] || zp[4] != out->p[P_WN] ||
	    lowrank_check(f, s, out, tgt, why, sizeof(why))) {
		out->p[P_ZBM] = out->p[P_BM];
		out->p[P_ZBN] = out->p[P_BN];
	}
	for (i = 0; i <= sizeof(fallback) / sizeof(fallback[0]); i++) {
		if (i > 0) {
			out->p[P_BM] = out->p[P_ZBM] = fallback[i - 1][0];
			out->p[P_BN] = out->p[P_ZBN] = fallback[i - 1][1];
			out->p[P_BK] = fallback[i - 1][2];
			out->p[P_WM] = fallback[i - 1][3];
			out->p[P_WN] = fallback[i - 1][4];
			out->p[P_STAGES] = fallback[i - 1][5];
		}
		for (k = 0; clamp && k < (int)(sizeof(params) / sizeof(params[0])); k++)
			out->p[k] = (params[k].variants >> out->variant) & 1u
					    ? kt_param_clamp(&lowrank_family, k, out->p[k])
					    : 0;
		if (lowrank_check(f, s, out, tgt, why, sizeof(why)) == 0)
			return 0;
	}
	return -1;
}

static int lowrank_default(const struct kt_family *f, const struct kt_shape *s,
			   const struct kt_target *tgt, struct kt_config *out)
{
	long T = s->v[D_TOKENS];

	if (tgt->sm == 90 && T <= 64 && lowrank_default_decode(f, s, tgt, out) == 0)
		return 0;
	if (tgt->arch_a && (lowrank_default_ws(f, s, tgt, out) == 0 ||
			    lowrank_default_wgmma(f, s, tgt, out) == 0))
		return 0;
	/* a point of the space; only where none of those fits (rank 16 or
	 * under: the space's smallest rank tile, 32, is over twice it) the
	 * GEMM list's own tile */
	if (lowrank_default_mma(f, s, tgt, 1, out) == 0)
		return 0;
	return lowrank_default_mma(f, s, tgt, 0, out);
}

const struct kt_family lowrank_family = {
	.name = "lowrank",
	.summary = "y = (x V^T) U^T, rank-r factorized linear layer, bf16",
	.hidden = 0,
	.ndims = 4,
	.dims = dims,
	.nvariants = 4,
	.variants = variants,
	.planted = 0,
	.nparams = (int)(sizeof(params) / sizeof(params[0])),
	.params = params,
	.tol = 1e-2,
	.check = lowrank_check,
	.buffers = lowrank_buffers,
	.plan = lowrank_plan,
	.ref_plan = lowrank_ref_plan,
	.cpu_ref = lowrank_cpu_ref,
	.fill = NULL,
	.flops = lowrank_flops,
	.min_bytes = lowrank_min_bytes,
	.default_config = lowrank_default,
};
