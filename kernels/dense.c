/*
 * dense.c -- the `dense` family: y (tokens x out) = x (tokens x in) . W^T,
 * W (out x in), bf16 in and out, fp32 accumulation. Our own GEMM core
 * (templates/gemm.cu); cuBLAS is timed beside it as the vendor baseline.
 *
 * Variants: mma_sync (sm_80+: cp.async ring, ldmatrix, mma.sync m16n8k16),
 * wgmma (sm_90a: the same ring feeding warpgroup MMAs that read shared
 * memory directly) and wgmma_ws (sm_90a: TMA loads into an mbarrier ring
 * from a producer warpgroup, CONSUMERS wgmma warpgroups, staged epilogue;
 * x and W reach it as KT_ARG_TMAP tensor maps the worker builds);
 * planted_fault and planted_hang fail on purpose. wgmma_ws with
 * PINGPONG=1 is the ping-pong form (templates/gemm_pingpong.cuh): one CTA
 * per SM walking the tiles, two consumer warpgroups taking turns on whole
 * BLOCK_M x BLOCK_N tiles, C stored through a third tensor map; not yet
 * verified or timed on a GPU, so no default picks it. wgmma_ws is the one that
 * keeps up with cuBLAS on the H200: its MMA warps issue no loads and its
 * epilogue writes whole 16-byte rows (docs/families/dense.md).
 *
 * Shape: tokens 1..2^20; in and out 16..65536 and multiples of 8 (the
 * template moves 16-byte chunks along K and stores bf16 pairs along N;
 * check() rejects every config for other values).
 */
#include "family.h"
#include "gemm_plan.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { D_TOKENS, D_IN, D_OUT };
enum { V_MMA_SYNC, V_WGMMA, V_PLANTED_FAULT, V_PLANTED_HANG, V_WGMMA_WS };
enum { B_X, B_W, B_Y, B_WS };

static const struct kt_dim dims[] = {
	{"tokens", 1, 1L << 20, 0, "rows of x (batch x sequence)"},
	{"in", 16, 65536, 0, "input features (K); a multiple of 8"},
	{"out", 16, 65536, 0, "output features (N); a multiple of 8"},
};

/* wgmma_ws comes last so that the earlier indices stay what they were */
static const char *const variants[] = {"mma_sync", "wgmma", "planted_fault", "planted_hang",
				       "wgmma_ws"};

#define MMA (1u << V_MMA_SYNC)
#define WG (1u << V_WGMMA)
#define WS (1u << V_WGMMA_WS)

/* Value lists aim at the best kernels on sm_80..sm_90 (on the H200 128x256
 * tiles, 8 warps, 4+ stages for many tokens; 16..64-row tiles for decode);
 * check() removes what does not fit the target. */
static const struct kt_param params[] = {
	{"BLOCK_M", 5, {16, 32, 64, 128, 256}, MMA | WG | WS,
	 "CTA tile rows (tokens); wgmma: 64 per warpgroup"},
	{"BLOCK_N", 4, {32, 64, 128, 256}, MMA | WG | WS, "CTA tile columns (out)"},
	{"BLOCK_K", 2, {32, 64}, MMA, "k-tile per pipeline stage (in); wgmma: 64"},
	{"WARPS_M", 3, {1, 2, 4}, MMA, "warps along M"},
	{"WARPS_N", 3, {1, 2, 4}, MMA, "warps along N"},
	{"STAGES", 6, {2, 3, 4, 5, 6, 8}, MMA | WG | WS, "cp.async / TMA ring depth"},
	{"GROUP_M", 2, {1, 8}, MMA | WG | WS,
	 "tile rows walked together for L2 reuse (1: plain order)"},
	{"SPLIT_K", 3, {1, 2, 4}, MMA | WG,
	 "K slices over grid.y (fp32 workspace + reduce) when tiles leave SMs idle"},
	{"CONSUMERS", 2, {1, 2}, WS,
	 "wgmma_ws: consumer warpgroups (each BLOCK_M/CONSUMERS rows) beside the TMA producer"},
	/* optional: keys from before it mean the one-tile kernel */
	{"PINGPONG", 2, {0, 1}, WS,
	 "wgmma_ws: 1 the ping-pong kernel (one CTA per SM walking the tiles; CONSUMERS=2, "
	 "each consumer warpgroup owns a whole BLOCK_M x BLOCK_N tile, BLOCK_M 64 or 128, and "
	 "the two take turns so one's TMA-store epilogue overlaps the other's main loop); "
	 "0 one CTA per tile, its CONSUMERS splitting BLOCK_M",
	 1, 0},
};

enum { P_CONSUMERS = 8, P_PINGPONG = 9 };

extern const struct kt_family dense_family;

/* The config's tile; PINGPONG 1 walks with one CTA per SM of tgt (every
 * work item its own CTA where the SM count is unknown: compile-only) */
static void tile_of(const struct kt_config *c, const struct kt_target *tgt,
		    struct kt_gemm_tile *t)
{
	memset(t, 0, sizeof(*t));
	kt_gemm_tile_from(&dense_family, c, t);
	if (c->variant == V_WGMMA_WS && c->p[P_PINGPONG] == 1)
		t->pingpong = kt_gemm_walk_ctas(tgt);
}

static int dense_check(const struct kt_family *f, const struct kt_shape *s,
		       const struct kt_config *c, const struct kt_target *tgt, char *why,
		       size_t whylen)
{
	struct kt_gemm_tile t;

	if (c->variant == V_PLANTED_FAULT || c->variant == V_PLANTED_HANG)
		return 0;
	if (c->variant != V_MMA_SYNC && c->variant != V_WGMMA && c->variant != V_WGMMA_WS)
		return snprintf(why, whylen, "unknown variant %d", c->variant), 1;
	tile_of(c, tgt, &t);
	/* the space's ping-pong tiles: 128 or 256 columns (64 would halve
	 * each wgmma's work per A byte read from shared memory), rings of 4
	 * to 5 (kt_gemm_check_space) -- a dozen points beside the one-tile
	 * kernel's */
	if (t.pingpong > 0 && t.bn != 128 && t.bn != 256)
		return snprintf(why, whylen, "PINGPONG with BLOCK_N=%ld: the space's ping-pong "
				"tiles are 128 or 256 columns", t.bn), 1;
	if (t.pingpong > 0 && t.stages < 4)
		return snprintf(why, whylen, "PINGPONG with STAGES=%ld: the space's ping-pong "
				"rings hold 4+ chunks (two tiles in flight)", t.stages), 1;
	return kt_gemm_check_space(&t, s->v[D_TOKENS], s->v[D_OUT], s->v[D_IN], 0, tgt, why, whylen);
}

static int dense_buffers(const struct kt_family *f, const struct kt_shape *s,
			 const struct kt_config *cfg, struct kt_buf out[KT_MAX_BUFS])
{
	size_t t = (size_t)s->v[D_TOKENS], n = (size_t)s->v[D_IN], m = (size_t)s->v[D_OUT];

	memset(out, 0, sizeof(*out) * 3);
	snprintf(out[B_X].name, sizeof(out[B_X].name), "x");
	out[B_X].role = KT_BUF_INPUT;
	out[B_X].dtype = KT_BF16;
	out[B_X].elems = t * n;
	out[B_X].scale = 1.0;
	/* W ~ U(-1/sqrt(in), 1/sqrt(in)) keeps y = O(1) for every in */
	snprintf(out[B_W].name, sizeof(out[B_W].name), "W");
	out[B_W].role = KT_BUF_INPUT;
	out[B_W].dtype = KT_BF16;
	out[B_W].elems = m * n;
	out[B_W].scale = 1.0 / sqrt((double)n);
	snprintf(out[B_Y].name, sizeof(out[B_Y].name), "y");
	out[B_Y].role = KT_BUF_OUTPUT;
	out[B_Y].dtype = KT_BF16;
	out[B_Y].elems = t * m;
	if (cfg && (cfg->variant == V_MMA_SYNC || cfg->variant == V_WGMMA ||
		    cfg->variant == V_WGMMA_WS)) {
		struct kt_gemm_tile tile;
		size_t ws;

		tile_of(cfg, NULL, &tile);
		if ((ws = kt_gemm_workspace(&tile, (long)t, (long)m)) > 0) {
			memset(&out[B_WS], 0, sizeof(out[B_WS]));
			snprintf(out[B_WS].name, sizeof(out[B_WS].name), "splitk_ws");
			out[B_WS].role = KT_BUF_SCRATCH;
			out[B_WS].dtype = KT_F32;
			out[B_WS].elems = ws;
			return 4;
		}
	}
	return 3;
}

static int planted_plan(int variant, struct kt_plan *out)
{
	struct kt_launch *l = &out->launch[0];

	out->nprograms = 1;
	out->programs[0].tpl = "planted";
	out->nlaunch = 1;
	snprintf(l->kernel, sizeof(l->kernel), "%s",
		 variant == V_PLANTED_FAULT ? "planted_fault" : "planted_hang");
	l->grid[0] = l->grid[1] = l->grid[2] = 1;
	l->block[0] = 32;
	l->block[1] = l->block[2] = 1;
	kt_launch_arg_buf(l, B_Y);
	return 0;
}

static int dense_plan(const struct kt_family *f, const struct kt_shape *s,
		      const struct kt_config *c, const struct kt_target *tgt, struct kt_plan *out,
		      struct kt_err *err)
{
	struct kt_gemm_tile t;
	char why[160];
	long M = s->v[D_TOKENS], N = s->v[D_OUT], K = s->v[D_IN];

	memset(out, 0, sizeof(*out));
	if (c->variant == V_PLANTED_FAULT || c->variant == V_PLANTED_HANG)
		return planted_plan(c->variant, out);
	if (dense_check(f, s, c, tgt, why, sizeof(why)))
		return kt_err_set(err, KT_EINVAL, "dense: config cannot run: %s", why);
	tile_of(c, tgt, &t);
	out->nprograms = 1;
	out->programs[0].tpl = "gemm";
	if (kt_gemm_defines(&t, &out->programs[0]))
		return kt_err_set(err, KT_EINTERNAL, "dense: too many defines");
	out->nlaunch = kt_gemm_launches(&t, 0, M, N, K, B_X, K, B_W, K, B_Y, N, B_WS, out->launch);
	return 0;
}

static int dense_ref_plan(const struct kt_family *f, const struct kt_shape *s,
			  const struct kt_target *tgt, struct kt_plan *out, struct kt_err *err)
{
	memset(out, 0, sizeof(*out));
	out->nprograms = 1;
	out->programs[0].tpl = "ref";
	out->nlaunch = 1;
	kt_ref_gemm_launch(0, s->v[D_TOKENS], s->v[D_OUT], s->v[D_IN], B_X, 0, B_W, B_Y, 0,
			   &out->launch[0]);
	(void)tgt;
	(void)err;
	return 0;
}

static int dense_cpu_ref(const struct kt_family *f, const struct kt_shape *s, const void *const *in,
			 float *const *out, struct kt_err *err)
{
	const uint16_t *x = in[B_X], *w = in[B_W];
	long T = s->v[D_TOKENS], n = s->v[D_IN], m = s->v[D_OUT], t, o, k;

	for (t = 0; t < T; t++)
		for (o = 0; o < m; o++) {
			double acc = 0;

			for (k = 0; k < n; k++)
				acc += (double)kt_bf16_to_f32(x[t * n + k]) *
				       (double)kt_bf16_to_f32(w[o * n + k]);
			out[0][t * m + o] = (float)acc;
		}
	(void)err;
	return 0;
}

static double dense_flops(const struct kt_family *f, const struct kt_shape *s)
{
	return 2.0 * s->v[D_TOKENS] * s->v[D_IN] * s->v[D_OUT];
}

static double dense_min_bytes(const struct kt_family *f, const struct kt_shape *s)
{
	double t = s->v[D_TOKENS], n = s->v[D_IN], m = s->v[D_OUT];

	return 2.0 * (t * n + n * m + t * m);
}

/* On sm_90a a warp-specialized tile, best first, each with its time per
 * FLOP relative to cuBLAS as tools/gemm_probe.cu measured it on the H200
 * (docs/families/dense.md), taken when its grid fills at least half the
 * machine; then a warpgroup-MMA tile; else the mma.sync list. */
static const long ws_defaults[][5] = {
	/* BLOCK_M, BLOCK_N, STAGES, CONSUMERS, time per FLOP (cuBLAS = 100) */
	{128, 256, 4, 2, 101},
	{256, 128, 4, 2, 102},
	{128, 128, 5, 2, 113},
	{64, 128, 5, 1, 121},
};

static const long wgmma_defaults[][3] = {
	/* BLOCK_M, BLOCK_N, STAGES */
	{256, 128, 4},
	{128, 256, 4},
	{128, 128, 5},
	{128, 64, 4},
};

static int dense_default(const struct kt_family *f, const struct kt_shape *s,
			 const struct kt_target *tgt, struct kt_config *out)
{
	long M = s->v[D_TOKENS], N = s->v[D_OUT];
	int sms = tgt->sms > 0 ? tgt->sms : 132;
	char why[160];
	size_t i;

	/* the ws tile with the least time per SM (waves x tile area x the
	 * tile's time per FLOP; the list order breaks ties): at 1000 x 4104,
	 * 128x256 needs 136 CTAs, two waves on 132 SMs, 256x128 one, which
	 * takes about half the time. Without the time per FLOP, 64x128's finer
	 * waves would win at 16384 x 4096 (63 waves of 8192 against 16 of
	 * 32768) though each of its FLOPs costs 20% more. */
	{
		struct kt_config best;
		long best_cost = -1;

		for (i = 0; tgt->arch_a && i < sizeof(ws_defaults) / sizeof(ws_defaults[0]); i++) {
			long bm = ws_defaults[i][0], bn = ws_defaults[i][1];
			long tiles = ((M + bm - 1) / bm) * ((N + bn - 1) / bn);
			long cost = (tiles + sms - 1) / sms * bm * bn * ws_defaults[i][4];

			memset(out, 0, sizeof(*out));
			out->variant = V_WGMMA_WS;
			out->p[0] = bm;
			out->p[1] = bn;
			out->p[5] = ws_defaults[i][2];
			/* GROUP_M 1: plain tile order is ~12% faster than 8
			 * at 16384 x 4096 x 4096 and within 2% at 4096 tokens
			 * (bench/results/dense_large_n.json) */
			out->p[6] = 1;
			out->p[P_CONSUMERS] = ws_defaults[i][3];
			if (tiles >= sms / 2 && dense_check(f, s, out, tgt, why,
							    sizeof(why)) == 0 &&
			    (best_cost < 0 || cost < best_cost)) {
				best = *out;
				best_cost = cost;
			}
		}
		if (best_cost >= 0) {
			*out = best;
			return 0;
		}
	}
	memset(out, 0, sizeof(*out));
	for (i = 0; tgt->arch_a && i < sizeof(wgmma_defaults) / sizeof(wgmma_defaults[0]); i++) {
		long bm = wgmma_defaults[i][0], bn = wgmma_defaults[i][1];

		out->variant = V_WGMMA;
		out->p[0] = bm;
		out->p[1] = bn;
		out->p[5] = wgmma_defaults[i][2];
		out->p[6] = 8;
		out->p[7] = 1;	/* SPLIT_K */
		if (((M + bm - 1) / bm) * ((N + bn - 1) / bn) >= sms / 2 &&
		    dense_check(f, s, out, tgt, why, sizeof(why)) == 0)
			return 0;
	}
	memset(out, 0, sizeof(*out));
	out->variant = V_MMA_SYNC;
	out->p[7] = 1;	/* SPLIT_K */
	if (kt_gemm_default(s->v[D_TOKENS], s->v[D_OUT], s->v[D_IN], tgt, out->p))
		return -1;
	/* sm_90, the list's 16-row decode tile (16 x 32 x 64 on 5 stages) on
	 * an 8-deep ring: its CTAs stream the weights with more bytes in
	 * flight, faster on the H200 at every shape of
	 * bench/results/dense_decode.json. Other targets keep the list's 5
	 * (not measured there). */
	if (tgt->sm == 90 && out->p[0] == 16 && out->p[1] == 32 && out->p[2] == 64 &&
	    out->p[5] == 5) {
		long stages = out->p[5];

		out->p[5] = 8;
		if (dense_check(f, s, out, tgt, why, sizeof(why)))
			out->p[5] = stages;
	}
	return 0;
}

const struct kt_family dense_family = {
	.name = "dense",
	.summary = "y = x W^T, bf16, fp32 accumulate: ktune's GEMM core "
		   "(mma.sync, wgmma, TMA warp-specialized)",
	.hidden = 0,
	.ndims = 3,
	.dims = dims,
	.nvariants = 5,
	.variants = variants,
	.planted = (1u << V_PLANTED_FAULT) | (1u << V_PLANTED_HANG),
	.nparams = (int)(sizeof(params) / sizeof(params[0])),
	.params = params,
	.tol = 1e-2,
	.check = dense_check,
	.buffers = dense_buffers,
	.plan = dense_plan,
	.ref_plan = dense_ref_plan,
	.cpu_ref = dense_cpu_ref,
	.fill = NULL,
	.flops = dense_flops,
	.min_bytes = dense_min_bytes,
	.default_config = dense_default,
};
