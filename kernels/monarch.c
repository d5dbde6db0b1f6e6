/*
 * monarch.c -- the `monarch` and `monarch_bm` families: a Monarch structured
 * linear layer, y (tokens x out) = x (tokens x in) . W^T, W given by w1 (b,
 * r, n/b) and w2 (b, m/b, r), bf16, fp32 accumulation (docs/kernels.md; rp =
 * r/b, nb = n/b, mb = m/b):
 *   z[j] = x[:, j*nb ..] . w1[j]^T                 stage 1 (N x r per block)
 *   g[i][t][j*rp + q] = z[j][t][q*b + i]            middle permutation
 *   y2[i] = g[i] . w2[i]^T                          stage 2 (N x mb per block)
 *   y[t][s*b + i] = y2[i][t][s]                     output permutation
 * monarch_bm (the paper's (3)) leaves y block-major, y[t][i*mb + s], for a
 * next layer whose weights are permuted offline: a family of its own, since
 * every config of a problem is checked against one reference output.
 *
 * Variants (docs/families/monarch.md says how each works and where it wins;
 * the stages are templates/gemm.cu's batched GEMMs, the data movement
 * templates/monarch.cu): naive (the textbook sequence, the baseline),
 * relayout (the paper's (1): w1's rows re-laid offline into w1r, so stage 1
 * writes contiguous runs and the permutations become 16-byte copies), both
 * also on wgmma (*_wgmma) and on the warp-specialized kernel (*_ws), and
 * fused_ws (the whole layer in one sm_90a kernel, templates/monarch_fused.cu).
 * GSTORE 1 (the paper's (2)) has stage 1 store g itself through gemm.cu's
 * column groups, YSTORE 1 stage 2 store the interleaved y, PDL 1 stage 2
 * start as stage 1's dependent: no copy launch between or after the stages.
 * NEEDSWORK: fused_ws takes only rank/blocks 64 or 128 (96, llama7b gate/up,
 * needs an m64n96 wgmma), in/blocks <= 64 * RING (down's 688 needs the ring
 * released per k-chunk) and out/blocks <= 256 (gpt2s c_fc's 768 needs an
 * output tile split, G recomputed per tile).
 *
 * Shape: tokens 1..2^20; in, out 16..65536; blocks 1..256 and rank 8..65536
 * (both structural). check() requires blocks to divide in, out and rank and
 * in/blocks, out/blocks and rank to be multiples of 8 (the GEMM moves
 * 16-byte chunks along K and stores pairs along N); relayout also needs
 * rank/blocks to be a multiple of 8 (its chunk copies).
 */
#include "family.h"
#include "gemm_plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { D_TOKENS, D_IN, D_OUT, D_BLOCKS, D_RANK };
/* new variants go last: stored configs keep their variant index */
enum { V_NAIVE, V_RELAYOUT, V_NAIVE_WGMMA, V_RELAYOUT_WGMMA, V_NAIVE_WS, V_RELAYOUT_WS,
       V_FUSED_WS, V_COUNT };
/* problem buffers first (x, w1, w2, y, the reference's z32), then scratch;
 * B_ARRIVED only for fused_ws's EPILOGUE 3 */
enum { B_X, B_W1, B_W2, B_Y, B_Z32, B_Z, B_G, B_Y2, B_W1R, B_ARRIVED };
enum { P_BM, P_BN, P_ZBN, P_BK, P_WM, P_WN, P_STAGES, P_GROUP, P_CONS, P_RING, P_EPI,
       P_CLI, P_CLT, P_GSTORE, P_YSTORE, P_PDL, P_PERSIST };

#define PERM_X8_THREADS 128	/* monarch_perm_x8's block (monarch.cu says why) */

static const struct kt_dim dims[] = {
	{"tokens", 1, 1L << 20, 0, "rows of x (batch x sequence)"},
	{"in", 16, 65536, 0, "input features n; in/blocks a multiple of 8"},
	{"out", 16, 65536, 0, "output features m; out/blocks a multiple of 8"},
	{"blocks", 1, 256, 1, "Monarch blocks b; divides in, out and rank"},
	{"rank", 8, 65536, 1, "rank r (per-block rank r/blocks); a multiple of 8"},
};

static const char *const variants[] = {"naive",	  "relayout", "naive_wgmma",
				       "relayout_wgmma", "naive_ws", "relayout_ws", "fused_ws"};

#define MMA ((1u << V_NAIVE) | (1u << V_RELAYOUT))
#define WG ((1u << V_NAIVE_WGMMA) | (1u << V_RELAYOUT_WGMMA))
#define WS ((1u << V_NAIVE_WS) | (1u << V_RELAYOUT_WS))
#define ALLV (MMA | WG | WS)
#define FUSED (1u << V_FUSED_WS)
#define RELAYOUTV ((1u << V_RELAYOUT) | (1u << V_RELAYOUT_WGMMA) | (1u << V_RELAYOUT_WS))

/* One tile shared by both GEMM stages except its N: stage 1's N is the
 * rank, stage 2's is out/blocks, which differ by up to 16x in the reference
 * shapes. Sharing the rest keeps the space a few thousand points. */
static const struct kt_param params[] = {
	{"BLOCK_M", 4, {16, 32, 64, 128}, ALLV | FUSED,
	 "token tile of both GEMM stages (fused_ws: 64 per consumer warpgroup)"},
	{"BLOCK_N", 4, {32, 64, 128, 256}, ALLV, "out/blocks tile of stage 2"},
	{"Z_BLOCK_N", 4, {32, 64, 128, 256}, ALLV, "rank tile of stage 1"},
	{"BLOCK_K", 2, {32, 64}, MMA, "k-tile per pipeline stage (wgmma: 64)"},
	{"WARPS_M", 3, {1, 2, 4}, MMA, "warps along tokens (wgmma: BLOCK_M/16)"},
	{"WARPS_N", 3, {1, 2, 4}, MMA, "warps along rank / out (wgmma: 1)"},
	{"STAGES", 5, {2, 3, 4, 6, 8}, ALLV, "cp.async pipeline (ws: TMA ring) depth"},
	{"GROUP_M", 1, {8}, ALLV, "tile rows walked together for L2 reuse"},
	{"CONSUMERS", 2, {1, 2}, WS,
	 "ws: consumer warpgroups per CTA (each BLOCK_M/CONSUMERS rows), both stages"},
	{"RING", 5, {4, 5, 6, 7, 8}, FUSED,
	 "fused_ws: TMA ring slots of 64-wide (x, w1r) k-chunks; one input block's must fit; "
	 "7 and 8 with one w2 slice buffer (4-6: two)"},
	{"EPILOGUE", 4, {0, 1, 2, 3}, FUSED,
	 "fused_ws: 0 stores from the accumulators, 1 stages 16-byte rows (monarch: into y2, "
	 "then a row permutation kernel), 2 (monarch) interleaves in 8-CTA clusters, 3 "
	 "(monarch) stores y2, waits for the token tile's CTAs and interleaves it in-kernel "
	 "(a cooperative launch)"},
	{"CLUSTER_I", 2, {1, 2}, FUSED,
	 "fused_ws: 2 pairs the CTAs of output blocks i, i+1 to multicast the x tiles they share"},
	{"CLUSTER_T", 2, {1, 2}, FUSED,
	 "fused_ws: 2 pairs the CTAs of two token tiles to multicast the weight tiles they share"},
	/* optional: keys from before it (the relayout variants' copy form)
	 * parse as 0 */
	{"GSTORE", 2, {0, 1}, RELAYOUTV,
	 "relayout*: 1 stage 1 stores g itself (the middle permutation as column groups of "
	 "rank/blocks in its epilogue), 0 stores z and a 16-byte copy makes g",
	 1, 0},
	/* optional too: keys from before it mean the permutation launch */
	{"YSTORE", 2, {0, 1}, (1u << V_RELAYOUT) | (1u << V_RELAYOUT_WGMMA),
	 "relayout, relayout_wgmma (monarch): 1 stage 2 stores y interleaved itself (2-byte "
	 "stores at stride blocks; for few tokens), 0 stores y2 and a 16-byte permutation "
	 "makes y; monarch_bm: 0",
	 1, 0},
	/* optional: keys from before it mean two plain launches */
	{"PDL", 2, {0, 1}, 1u << V_RELAYOUT,
	 "relayout with GSTORE 1 (sm_90+): 1 stage 2 is a programmatic dependent launch of "
	 "stage 1 that loads its first w2 stages while stage 1 finishes, 0 a plain launch",
	 1, 0},
	/* optional: keys from before it mean one CTA per tile */
	{"PERSISTENT", 4, {0, 1, 2, 3}, WS,
	 "ws stages on gemm.cu's persistent kernel (one CTA per SM walking the tiles, the next "
	 "tile's loads under this one's epilogue; for short K, in/blocks and rank): 0 none, "
	 "1 stage 1, 2 stage 2, 3 both",
	 1, 0},
};

/* The two families' priv: 1 where y is left block-major (monarch_bm). */
static const int layouts[2] = {0, 1};

extern const struct kt_family monarch_family;

static int block_major(const struct kt_family *f)
{
	return *(const int *)f->priv;
}

/* y2 is stage 2's tile, z1 stage 1's. */
static void tiles_of(const struct kt_config *c, const struct kt_target *tgt,
		     struct kt_gemm_tile *z1, struct kt_gemm_tile *y2)
{
	const long ctas = kt_gemm_walk_ctas(tgt);	/* PERSISTENT's walk */

	kt_gemm_tile_set(y2, c->p[P_BM], c->p[P_BN], c->p[P_BK], c->p[P_WM], c->p[P_WN],
			 c->p[P_STAGES], c->p[P_GROUP],
			 c->variant == V_NAIVE_WGMMA || c->variant == V_RELAYOUT_WGMMA);
	if (c->variant == V_NAIVE_WS || c->variant == V_RELAYOUT_WS) {
		/* warp-specialized tiles: a producer warpgroup + CONSUMERS
		 * wgmma warpgroups */
		y2->ws = 1;
		y2->consumers = c->p[P_CONS] > 0 ? c->p[P_CONS] : 1;
		kt_gemm_tile_wg(y2);
		/* stage 1's x blocks: the (k, batch, rows) map */
		y2->row_batches = 1;
	}
	/* PDL 1: both programs carry gemm.cu's PDL prologue (w1 / w2, the
	 * B operands, are nobody's output); monarch_plan flags stage 2 only */
	y2->pdl = c->variant == V_RELAYOUT && c->p[P_PDL] == 1;
	*z1 = *y2;
	z1->bn = c->p[P_ZBN];
	if (y2->ws) {
		z1->persistent = c->p[P_PERSIST] & 1 ? ctas : 0;
		y2->persistent = c->p[P_PERSIST] & 2 ? ctas : 0;
	}
}

static int is_relayout(int variant)
{
	return variant == V_RELAYOUT || variant == V_RELAYOUT_WGMMA || variant == V_RELAYOUT_WS;
}

/* (2) and the output permutation folded into the GEMM stores: a relayout
 * variant's stage 1 writes g itself (GSTORE 1), stage 2 the interleaved y
 * (YSTORE 1; monarch_check refuses it for monarch_bm) */
static int stores_g(const struct kt_config *c)
{
	return is_relayout(c->variant) && c->p[P_GSTORE] == 1;
}

static int stores_y(const struct kt_config *c)
{
	return is_relayout(c->variant) && c->p[P_YSTORE] == 1;
}

/* the variants that read w1r, the re-laid w1 (their prep launch) */
static int has_w1r(int variant)
{
	return is_relayout(variant) || variant == V_FUSED_WS;
}

#define WHY(...) (snprintf(why, whylen, __VA_ARGS__), 1)

/* fused_ws (templates/monarch_fused.cu): what the kernel's static_asserts,
 * the copy engine and the target accept. */
static long fused_consumers(const struct kt_config *c)
{
	return c->p[P_BM] / 64;
}

/* w2 slice buffers: RING 7 and 8 fit (BLOCK_M 128) only with one, which
 * the consumers release as soon as their second product retired; RING 4-6
 * keep the two that configs stored before RING 7 were measured with.
 * The one buffer's reload is exposed every j, which costs more than the
 * deeper ring gives (docs/families/monarch.md); monarch_fused.cu's
 * NEEDSWORK says what is left. */
/* A w2 unit: the lcm(rank/blocks, 64) columns of the 64 / gcd slices that
 * share whole 64-wide panels (one slice for rank/blocks 64 and 128). */
static long fused_ucol(long rp)
{
	long a = rp, b = 64;

	while (b) {
		long t = a % b;

		a = b;
		b = t;
	}
	return rp / a * 64;
}

/* One buffer too where the shape has a single w2 unit (all b slices in
 * one, e.g. gpt2s c_fc's 4 of 48 columns): it is loaded once, so a second
 * would only take shared memory. */
static long fused_w2buf(const struct kt_shape *s, const struct kt_config *c)
{
	long b = s->v[D_BLOCKS], rp = s->v[D_RANK] / b;

	return c->p[P_RING] > 6 || b * rp == fused_ucol(rp) ? 1 : 2;
}

/* The output tile of a CTA: the whole block where out/blocks is one wgmma
 * N (64, 128, 256), else the widest of those dividing it (column tiles,
 * each CTA recomputing its G); 0 where none does. */
static long fused_mbt(long mb)
{
	if (mb == 64 || mb == 128 || mb == 256)
		return mb;
	return mb % 256 == 0 ? 256 : mb % 128 == 0 ? 128 : mb % 64 == 0 ? 64 : 0;
}

static unsigned long fused_smem(const struct kt_shape *s, const struct kt_config *c)
{
	long b = s->v[D_BLOCKS], rp = s->v[D_RANK] / b, mbt = fused_mbt(s->v[D_OUT] / b);

	/* alignment, the ring of (x, w1r) k-chunks, the w2 buffers (a unit
	 * each), barriers */
	return 1024 +
	       (unsigned long)(c->p[P_RING] * (c->p[P_BM] + rp) * 128 +
			       fused_w2buf(s, c) * fused_ucol(rp) * mbt * 2) +
	       256;
}

/* CTAs of fused_monarch_ws: token tiles padded to whole CLUSTER_T pairs,
 * times the output blocks, times the column tiles of a block */
static long fused_grid(const struct kt_shape *s, const struct kt_config *c)
{
	long bmt = c->p[P_BM], ct = c->p[P_CLT], b = s->v[D_BLOCKS], mb = s->v[D_OUT] / b;

	return (s->v[D_TOKENS] + bmt * ct - 1) / (bmt * ct) * ct * b * (mb / fused_mbt(mb));
}

/* monarch_perm_rows's shared memory: one row, each block's run padded */
static unsigned long perm_rows_smem(const struct kt_shape *s)
{
	long b = s->v[D_BLOCKS], mb = s->v[D_OUT] / b;

	return (unsigned long)(b * (mb + 8) * 2);
}

static int fused_check(int bm, const struct kt_shape *s, const struct kt_config *c,
		       const struct kt_target *tgt, char *why, size_t whylen)
{
	long T = s->v[D_TOKENS], b = s->v[D_BLOCKS];
	long nb = s->v[D_IN] / b, mb = s->v[D_OUT] / b, rp = s->v[D_RANK] / b;
	long cons = fused_consumers(c), kch = (nb + 63) / 64, mbt;
	unsigned long smem;

	if (tgt->sm != 90 || !tgt->arch_a)
		return WHY("fused_ws (wgmma, TMA, setmaxnreg) needs sm_90a, target is sm_%d%s",
			   tgt->sm, tgt->arch_a ? "a" : "");
	if (c->p[P_BM] != 64 && c->p[P_BM] != 128)
		return WHY("fused_ws: BLOCK_M=%ld must be 64 or 128 (one or two consumer "
			   "warpgroups of 64 rows)", c->p[P_BM]);
	if (rp != 16 && rp != 32 && rp != 48 && rp != 64 && rp != 128)
		return WHY("fused_ws: rank/blocks=%ld must be 16, 32, 48, 64 or 128 (the first "
			   "product's N; w2 in units of whole 64-wide k panels)", rp);
	/* a w2 buffer holds a unit: the lcm(rp, 64) columns of ucol / rp
	 * consecutive input blocks (one for rp 64, 128); more than one unit
	 * takes two buffers */
	if (b % (fused_ucol(rp) / rp))
		return WHY("fused_ws: rank/blocks=%ld shares w2 panels between %ld input blocks: "
			   "blocks=%ld must be a multiple", rp, fused_ucol(rp) / rp, b);
	if (fused_ucol(rp) > rp && b * rp > fused_ucol(rp) && fused_w2buf(s, c) != 2)
		return WHY("fused_ws: rank/blocks=%ld needs two w2 buffers: RING=%ld leaves room "
			   "for one (RING <= 6)", rp, c->p[P_RING]);
	mbt = fused_mbt(mb);
	if (!mbt)
		return WHY("fused_ws: out/blocks=%ld must be 64, 128, 256 or a multiple of 64 (a "
			   "CTA's output tile is one wgmma N, in registers)", mb);
	/* per consumer thread: the output tile, G and its bf16 fragments */
	if (mbt / 2 + rp / 2 + rp / 4 > 176)
		return WHY("fused_ws: an output tile of %ld with rank/blocks=%ld needs %ld "
			   "accumulator registers per thread (> 176)", mbt, rp,
			   mbt / 2 + rp / 2 + rp / 4);
	if (mbt < mb && (c->p[P_CLI] != 1 || c->p[P_CLT] != 1 || c->p[P_EPI] >= 2))
		return WHY("fused_ws: out/blocks=%ld is %ld column tiles of %ld: CLUSTER_I and "
			   "CLUSTER_T must be 1 and EPILOGUE 0 or 1 (one CTA per output block)",
			   mb, mb / mbt, mbt);
	if ((c->p[P_CLI] != 1 && c->p[P_CLI] != 2) || (c->p[P_CLT] != 1 && c->p[P_CLT] != 2))
		return WHY("fused_ws: CLUSTER_I=%ld and CLUSTER_T=%ld must be 1 or 2", c->p[P_CLI],
			   c->p[P_CLT]);
	if (b % c->p[P_CLI])
		return WHY("fused_ws: CLUSTER_I=%ld pairs output blocks: blocks=%ld is odd",
			   c->p[P_CLI], b);
	if (kch > c->p[P_RING])
		return WHY("fused_ws: in/blocks=%ld is %ld k-chunks of 64, over RING=%ld (one "
			   "input block's chunks must fit in the ring)", nb, kch, c->p[P_RING]);
	if (c->p[P_EPI] < 0 || c->p[P_EPI] > 3)
		return WHY("fused_ws: EPILOGUE=%ld must be 0, 1, 2 or 3", c->p[P_EPI]);
	/* EPILOGUE 2: clusters of the 8 CTAs of blocks i0 .. i0+7 exchange
	 * their tiles (distributed shared memory) for 16-byte stores of the
	 * interleaved y. EPILOGUE 3: each CTA stores its y2 tile, waits until
	 * the b CTAs of its token tile have, and interleaves its share (whole
	 * 8 x 8 tiles of 8 blocks: any b % 8 == 0 splits evenly, whatever
	 * BLOCK_M). Both work on groups of 8 blocks, without clusters of the
	 * kind CLUSTER_I / CLUSTER_T make; block-major rows are contiguous
	 * without either. EPILOGUE 3's wait needs every CTA resident at once:
	 * the launch is cooperative (the driver refuses what cannot be), and
	 * with one CTA per SM (the kernel's registers and shared memory) a
	 * grid past the SM count is refused here, where the SM count is
	 * known. */
	if ((c->p[P_EPI] == 2 || c->p[P_EPI] == 3) && bm)
		return WHY("fused_ws: EPILOGUE=%ld interleaves y (monarch only; monarch_bm's rows "
			   "are contiguous: EPILOGUE=1)", c->p[P_EPI]);
	if ((c->p[P_EPI] == 2 || c->p[P_EPI] == 3) && b % 8)
		return WHY("fused_ws: EPILOGUE=%ld interleaves groups of 8 output blocks: "
			   "blocks=%ld is not a multiple of 8", c->p[P_EPI], b);
	if ((c->p[P_EPI] == 2 || c->p[P_EPI] == 3) && (c->p[P_CLI] != 1 || c->p[P_CLT] != 1))
		return WHY("fused_ws: EPILOGUE=%ld has one CTA per (token tile, block) take part: "
			   "CLUSTER_I and CLUSTER_T must be 1", c->p[P_EPI]);
	if (c->p[P_EPI] == 3 && tgt->sms > 0 && fused_grid(s, c) > tgt->sms)
		return WHY("fused_ws: EPILOGUE=3 needs its %ld CTAs (%ld token tiles x %ld blocks, "
			   "one per SM) resident at once: the target has %d SMs",
			   fused_grid(s, c), fused_grid(s, c) / b, b, tgt->sms);
	/* monarch's EPILOGUE 1: y2 block-major, then monarch_perm_x8 (blocks
	 * % 8 == 0, no shared memory) or monarch_perm_rows */
	if (c->p[P_EPI] == 1 && !bm && b % 8 && perm_rows_smem(s) > (unsigned long)tgt->smem_optin)
		return WHY("fused_ws: EPILOGUE=1's row permutation needs %lu B of shared memory "
			   "> %d B", perm_rows_smem(s), tgt->smem_optin);
	if ((cons + 1) * 128 > tgt->max_threads)
		return WHY("%ld threads > %d per block", (cons + 1) * 128, tgt->max_threads);
	smem = fused_smem(s, c);
	if (smem > (unsigned long)tgt->smem_optin)
		return WHY("shared memory %lu B > %d B opt-in limit", smem, tgt->smem_optin);
	if (c->p[P_BM] / 2 >= T)
		return WHY("BLOCK_M=%ld is over twice tokens=%ld", c->p[P_BM], T);
	return 0;
}

/* The structural rules, independent of the config. */
static int shape_check(const struct kt_shape *s, char *why, size_t whylen)
{
	long n = s->v[D_IN], m = s->v[D_OUT], b = s->v[D_BLOCKS], r = s->v[D_RANK];

	if (b < 1 || n % b || m % b || r % b)
		return WHY("blocks=%ld must divide in=%ld, out=%ld and rank=%ld", b, n, m, r);
	if ((n / b) % 8 || (m / b) % 8 || r % 8)
		return WHY("in/blocks=%ld, out/blocks=%ld and rank=%ld must be multiples of 8 "
			   "(16-byte GEMM copies)", n / b, m / b, r);
	return 0;
}

static int monarch_check(const struct kt_family *f, const struct kt_shape *s,
			 const struct kt_config *c, const struct kt_target *tgt, char *why,
			 size_t whylen)
{
	const int bm = block_major(f);
	struct kt_gemm_tile z1, y2;
	long T = s->v[D_TOKENS], n = s->v[D_IN], m = s->v[D_OUT], b = s->v[D_BLOCKS];
	long r = s->v[D_RANK];

	if (c->variant < 0 || c->variant >= V_COUNT)
		return WHY("unknown variant %d", c->variant);
	if (shape_check(s, why, whylen))
		return 1;
	if (c->variant == V_FUSED_WS)
		return fused_check(bm, s, c, tgt, why, whylen);
	if (is_relayout(c->variant) && (r / b) % 8)
		return WHY("relayout copies 16-byte chunks: rank/blocks=%ld must be a multiple of 8",
			   r / b);
	if (bm && c->p[P_YSTORE] == 1)
		return WHY("YSTORE=1 interleaves y: monarch_bm's y is block-major (YSTORE=0)");
	if (c->variant == V_RELAYOUT && c->p[P_PDL] == 1 && !stores_g(c))
		return WHY("PDL=1 makes stage 2 the dependent of stage 1: with GSTORE=0 the copy "
			   "launch sits between them");
	if (KT_ELEM_THREADS > tgt->max_threads)
		return WHY("the permutation kernels need %d threads per block, target has %d",
			   KT_ELEM_THREADS, tgt->max_threads);
	tiles_of(c, tgt, &z1, &y2);
	if (kt_gemm_check_space(&z1, T, r, n / b, 0, tgt, why, whylen))
		return 1;
	return kt_gemm_check_space(&y2, T, m / b, r, 0, tgt, why, whylen);
}

static int monarch_buffers(const struct kt_family *f, const struct kt_shape *s,
			   const struct kt_config *cfg, struct kt_buf out[KT_MAX_BUFS])
{
	size_t T = (size_t)s->v[D_TOKENS], n = (size_t)s->v[D_IN], m = (size_t)s->v[D_OUT];
	size_t b = (size_t)s->v[D_BLOCKS], r = (size_t)s->v[D_RANK];
	size_t nb = b ? n / b : n;

	/* each z value sums nb products, each y value r: these scales keep
	 * z and y O(1) whatever the shape */
	kt_buf_set(&out[B_X], "x", KT_BUF_INPUT, KT_BF16, T * n, 1.0);
	kt_buf_set(&out[B_W1], "w1", KT_BUF_INPUT, KT_BF16, r * n, 1.0 / sqrt((double)nb));
	kt_buf_set(&out[B_W2], "w2", KT_BUF_INPUT, KT_BF16, m * r, 1.0 / sqrt((double)r));
	kt_buf_set(&out[B_Y], "y", KT_BUF_OUTPUT, KT_BF16, T * m, 0);
	/* the GPU reference's fp32 intermediate: a problem buffer */
	kt_buf_set(&out[B_Z32], "z32", KT_BUF_SCRATCH, KT_F32, b * T * r, 0);
	if (!cfg || cfg->variant < 0 || cfg->variant >= V_COUNT)
		return 5;
	/* fused_ws has no intermediate: z, g stay empty (their indices keep
	 * w1r's); y2 only for EPILOGUE 1 (monarch: block-major y2, then the
	 * row permutation) and 3 (y2, interleaved in-kernel) */
	{
		size_t inter = cfg->variant == V_FUSED_WS ? 0 : 1;
		size_t y2 = inter || cfg->p[P_EPI] == 1 || cfg->p[P_EPI] == 3 ? 1 : 0;
		size_t zb = stores_g(cfg) ? 0 : inter;

		if (stores_y(cfg))
			y2 = 0;

		kt_buf_set(&out[B_Z], "z", KT_BUF_SCRATCH, KT_BF16, zb * b * T * r, 0);
		kt_buf_set(&out[B_G], "g", KT_BUF_SCRATCH, KT_BF16, inter * b * T * r, 0);
		kt_buf_set(&out[B_Y2], "y2", KT_BUF_SCRATCH, KT_BF16, y2 * T * m, 0);
	}
	if (!has_w1r(cfg->variant))
		return 8;
	kt_buf_set(&out[B_W1R], "w1r", KT_BUF_SCRATCH, KT_BF16, r * n, 0);
	out[B_W1R].prepared = 1;
	if (cfg->variant != V_FUSED_WS || cfg->p[P_EPI] != 3 || cfg->p[P_BM] < 1)
		return 9;
	/* EPILOGUE 3's arrival counters, one per token tile: scratch, so the
	 * worker zeroes them once per candidate; each launch raises them by
	 * blocks and needs no reset (monarch_fused.cu's interleave) */
	kt_buf_set(&out[B_ARRIVED], "arrived", KT_BUF_SCRATCH, KT_I32,
		   (T + (size_t)cfg->p[P_BM] - 1) / (size_t)cfg->p[P_BM], 0);
	out[B_ARRIVED].zeroed = 1;
	return 10;
}

/* The arguments of the kernels that interleave block-major y2 into y
 * (monarch_perm_out, monarch_perm_rows): (y2, y, N, m, b). */
static void y2_to_y_args(struct kt_launch *l, long T, long m, long b)
{
	kt_launch_arg_buf(l, B_Y2);
	kt_launch_arg_buf(l, B_Y);
	kt_launch_arg_i32(l, T);
	kt_launch_arg_i32(l, m);
	kt_launch_arg_i32(l, b);
}

/* The launch of program `program` (monarch.cu) that interleaves
 * block-major y2 into y: monarch_perm_x8 (blocks % 8 == 0: 16-byte loads
 * and stores, 8 x 8 tiles transposed in registers), else monarch_perm_rows
 * where its row fits the target's shared memory (16-byte too), else
 * monarch_perm_out (2-byte gathers: consecutive outputs read 2 bytes mb
 * apart, which cost a third of relayout_ws's time at llama1b q/o). */
static void perm_launch(const struct kt_shape *s, const struct kt_target *tgt, int program,
			struct kt_launch *l)
{
	long T = s->v[D_TOKENS], m = s->v[D_OUT], b = s->v[D_BLOCKS], mb = m / b;

	memset(l, 0, sizeof(*l));
	l->program = program;
	l->grid[1] = l->grid[2] = 1;
	l->block[1] = l->block[2] = 1;
	if (b % 8 == 0) {
		/* a thread per 8 x 8 tile (8 s of 8 blocks); the kernel loops
		 * over what a capped grid leaves */
		long long grid = ((long long)T * (mb / 8) * (b / 8) + PERM_X8_THREADS - 1) /
				 PERM_X8_THREADS;

		snprintf(l->kernel, sizeof(l->kernel), "monarch_perm_x8");
		l->grid[0] = (unsigned)(grid > KT_ELEM_MAX_GRID ? KT_ELEM_MAX_GRID : grid);
		l->block[0] = PERM_X8_THREADS;
	} else if (perm_rows_smem(s) <= (unsigned long)tgt->smem_optin) {
		snprintf(l->kernel, sizeof(l->kernel), "monarch_perm_rows");
		l->grid[0] = (unsigned)T;
		l->block[0] = KT_ELEM_THREADS;
		l->smem = (unsigned)perm_rows_smem(s);
	} else {
		kt_launch_elem(l, program, "monarch_perm_out", (long long)T * m);
	}
	y2_to_y_args(l, T, m, b);
}

/* w1r's prep launch (program `program`, monarch.cu) and the transform it
 * stands for, which export carries. */
static void plan_relayout(const struct kt_shape *s, int program, struct kt_plan *out)
{
	long n = s->v[D_IN], b = s->v[D_BLOCKS], r = s->v[D_RANK];
	struct kt_launch *l;

	snprintf(out->transform, sizeof(out->transform),
		 "w1r[j][i*rp+q][:] = w1[j][q*b+i][:] (rp = rank/blocks): the rows of each "
		 "w1 block grouped by row mod blocks");
	out->nprep = 1;
	l = kt_launch_elem(&out->prep[0], program, "monarch_relayout_w1", (long long)r * n);
	kt_launch_arg_buf(l, B_W1);
	kt_launch_arg_buf(l, B_W1R);
	kt_launch_arg_i32(l, b);
	kt_launch_arg_i32(l, r);
	kt_launch_arg_i32(l, n / b);
}

/* Every prepared buffer of the space: w1r, which the relayout variants and
 * fused_ws read (the same re-layout for all), filled by monarch.cu's
 * relayout kernel (a program without defines). */
static int monarch_prepare_plan(const struct kt_family *f, const struct kt_shape *s,
				const struct kt_target *tgt, struct kt_plan *out,
				struct kt_buf bufs[KT_MAX_BUFS], int *nbufs, struct kt_err *err)
{
	char why[160];
	int i;

	(void)tgt;
	memset(out, 0, sizeof(*out));
	if (shape_check(s, why, sizeof(why)))
		return kt_err_set(err, KT_EINVAL, "monarch: %s", why);
	monarch_buffers(f, s, NULL, bufs);
	for (i = B_Z32 + 1; i < B_W1R; i++)
		kt_buf_set(&bufs[i], "", KT_BUF_SCRATCH, KT_BF16, 0, 0);
	kt_buf_set(&bufs[B_W1R], "w1r", KT_BUF_SCRATCH, KT_BF16,
		   (size_t)s->v[D_RANK] * (size_t)s->v[D_IN], 0);
	bufs[B_W1R].prepared = 1;
	*nbufs = B_W1R + 1;
	out->nprograms = 1;
	out->programs[0].tpl = "monarch";
	plan_relayout(s, 0, out);
	return 0;
}

/* fused_ws: the w1 re-layout (prep), then one launch of monarch_fused.cu
 * (its header says the maps, grid and shared memory); monarch with
 * EPILOGUE 1: that launch stores y2 block-major in 16-byte rows, then
 * monarch_perm_x8 (blocks % 8 == 0) or monarch_perm_rows interleaves it
 * into y (2-byte scattered stores at stride blocks take about the whole
 * kernel's time again); with EPILOGUE 3 the same launch, cooperative, does both
 * (y2, then y and the arrival counters as two more arguments). */
static int plan_fused(int bm, const struct kt_shape *s, const struct kt_config *c,
		      const struct kt_target *tgt, struct kt_plan *out, struct kt_err *err)
{
	struct kt_program *p = &out->programs[0];
	struct kt_launch *l = &out->launch[0];
	long T = s->v[D_TOKENS], n = s->v[D_IN], m = s->v[D_OUT], b = s->v[D_BLOCKS];
	long r = s->v[D_RANK], nb = n / b, mb = m / b, rp = r / b, bmt = c->p[P_BM];
	int rc = 0;

	out->nprograms = 2;
	p->tpl = "monarch_fused";
	rc |= kt_program_define(p, "BLOCK_M", bmt);
	rc |= kt_program_define(p, "CONSUMERS", fused_consumers(c));
	rc |= kt_program_define(p, "RING", c->p[P_RING]);
	rc |= kt_program_define(p, "W2BUF", fused_w2buf(s, c));
	rc |= kt_program_define(p, "RP", rp);
	rc |= kt_program_define(p, "MB", fused_mbt(mb));
	rc |= kt_program_define(p, "NCT", mb / fused_mbt(mb));
	/* the layout of the kernel's y argument (EPILOGUE 3: y2 block-major
	 * in, y interleaved out: 0) */
	rc |= kt_program_define(p, "BLOCKMAJOR", bm || c->p[P_EPI] == 1);
	rc |= kt_program_define(p, "EPILOGUE", c->p[P_EPI]);
	rc |= kt_program_define(p, "CLUSTER_I", c->p[P_CLI]);
	rc |= kt_program_define(p, "CLUSTER_T", c->p[P_CLT]);
	if (rc)
		return kt_err_set(err, KT_EINTERNAL, "monarch: too many defines");
	out->programs[1].tpl = "monarch";
	plan_relayout(s, 1, out);
	out->nlaunch = 1;
	memset(l, 0, sizeof(*l));
	l->program = 0;
	snprintf(l->kernel, sizeof(l->kernel), "fused_monarch_ws");
	/* token tiles padded to whole CLUSTER_T pairs (a padded tile's rows are
	 * all past tokens: zero-filled loads, no stores) */
	l->grid[0] = (unsigned)fused_grid(s, c);
	l->grid[1] = l->grid[2] = 1;
	l->block[0] = (unsigned)((fused_consumers(c) + 1) * 128);
	l->block[1] = l->block[2] = 1;
	l->smem = (unsigned)fused_smem(s, c);
	/* x (N, n) as (k, block j, token): block j's nb columns, zero past
	 * them; in a cluster each CTA loads (and multicasts) its part of the
	 * rows of the tiles it shares: x over CLUSTER_I, the weights over
	 * CLUSTER_T */
	kt_launch_arg_tmap3(l, B_X, nb, b, T, nb, n, 64, 1, (int)(bmt / c->p[P_CLI]));
	/* w1r (b, r, nb) as (k, row, block): rows i*rp .. of block j */
	kt_launch_arg_tmap3(l, B_W1R, nb, r, b, nb, r * nb, 64, (int)(rp / c->p[P_CLT]), 1);
	/* w2 (b, mb, r) as (k, row, block): columns j*rp .. of block i */
	kt_launch_arg_tmap3(l, B_W2, r, mb, b, r, mb * r, 64, (int)(fused_mbt(mb) / c->p[P_CLT]),
			    1);
	kt_launch_arg_buf(l, !bm && (c->p[P_EPI] == 1 || c->p[P_EPI] == 3) ? B_Y2 : B_Y);
	kt_launch_arg_i32(l, T);
	kt_launch_arg_i32(l, m);
	kt_launch_arg_i32(l, b);
	kt_launch_arg_i32(l, nb);
	if (c->p[P_EPI] == 3) {
		/* y2 staged, then interleaved into y by the same launch, whose
		 * CTAs wait for each other: cooperative */
		kt_launch_arg_buf(l, B_Y);
		kt_launch_arg_buf(l, B_ARRIVED);
		l->cooperative = 1;
		return 0;
	}
	if (bm || c->p[P_EPI] != 1)
		return 0;
	out->nlaunch = 2;
	/* fused_check refused a monarch_perm_rows that does not fit */
	perm_launch(s, tgt, 1, &out->launch[1]);
	return 0;
}

/* bm: the monarch_bm family, y block-major: stage 2 writes y itself. */
static int monarch_plan(const struct kt_family *f, const struct kt_shape *s,
			const struct kt_config *c, const struct kt_target *tgt, struct kt_plan *out,
			struct kt_err *err)
{
	const int bm = block_major(f);
	struct kt_gemm_tile z1, y2;
	struct kt_launch *l;
	char why[200];
	long T = s->v[D_TOKENS], n = s->v[D_IN], m = s->v[D_OUT], b = s->v[D_BLOCKS];
	long r = s->v[D_RANK], nb, mb;
	int same, pg1, pg2, pm, relayout = is_relayout(c->variant);
	int g_direct = stores_g(c), y_direct = stores_y(c);

	memset(out, 0, sizeof(*out));
	if (monarch_check(f, s, c, tgt, why, sizeof(why)))
		return kt_err_set(err, KT_EINVAL, "monarch: config cannot run: %s", why);
	if (c->variant == V_FUSED_WS)
		return plan_fused(bm, s, c, tgt, out, err);
	nb = n / b;
	mb = m / b;
	tiles_of(c, tgt, &z1, &y2);
	if (g_direct) {
		/* (2), the middle permutation in stage 1's store: w1r's column
		 * i*rp + q of block j is g[i][t][j*rp + q], so the staged
		 * epilogue writes groups of rp columns N*r apart, from g + j*rp
		 * with rows r apart; no copy between the stages */
		z1.col_group = r / b;
		z1.col_gstride = T * r;
	}
	if (y_direct)
		/* the output permutation in stage 2's store: column s of block
		 * i is y's column s*b + i (C = y + i, rows m apart, column step
		 * b); no permutation launch */
		y2.col_step = b;
	same = kt_gemm_same_program(&z1, &y2);
	pg1 = 0;
	pg2 = same ? 0 : 1;
	pm = pg2 + 1;
	out->nprograms = pm + 1;
	out->programs[pg1].tpl = "gemm";
	if (kt_gemm_defines(&z1, &out->programs[pg1]))
		return kt_err_set(err, KT_EINTERNAL, "monarch: too many defines");
	if (!same) {
		out->programs[pg2].tpl = "gemm";
		if (kt_gemm_defines(&y2, &out->programs[pg2]))
			return kt_err_set(err, KT_EINTERNAL, "monarch: too many defines");
	}
	out->programs[pm].tpl = "monarch";

	if (relayout)
		plan_relayout(s, pm, out);
	out->nlaunch = 0;
	/* stage 1, batch j: A = x + j*nb (rows n apart), B = w1[j] (or w1r[j]);
	 * naive writes z[j] at j*N*r (b, N, r); relayout writes it at j*r with
	 * rows b*r apart, i.e. z (N, b, b, rp); GSTORE 1 writes g at j*rp with
	 * rows r apart, its column groups N*r apart */
	if (g_direct) {
		kt_gemm_launch(&z1, pg1, T, r, nb, B_X, n, nb, B_W1R, nb, r * nb, B_G, r, r / b, b,
			       &out->launch[out->nlaunch]);
		/* PDL: stage 1 is the first launch timed after the L2 flush,
		 * and its prologue would read w1 before waiting: not a
		 * dependent. Its program still lets stage 2 start early. */
		out->launch[out->nlaunch++].pdl = 0;
	} else
		kt_gemm_launch(&z1, pg1, T, r, nb, B_X, n, nb, relayout ? B_W1R : B_W1, nb, r * nb,
			       B_Z, relayout ? b * r : r, relayout ? r : T * r, b,
			       &out->launch[out->nlaunch++]);
	if (!g_direct) {
		l = kt_launch_elem(&out->launch[out->nlaunch++], pm,
				relayout ? "monarch_gather_chunks" : "monarch_perm_mid",
				relayout ? (long long)b * T * r / 8 : (long long)b * T * r);
		kt_launch_arg_buf(l, B_Z);
		kt_launch_arg_buf(l, B_G);
		kt_launch_arg_i32(l, T);
		kt_launch_arg_i32(l, b);
		kt_launch_arg_i32(l, r);
	}
	/* stage 2, batch i: A = g[i] (b, N, r), B = w2[i]; y2 block-major:
	 * block i's columns at i*mb of rows m apart (monarch_bm: that is y) */
	if (y_direct)
		kt_gemm_launch(&y2, pg2, T, mb, r, B_G, r, T * r, B_W2, r, mb * r, B_Y, m, 1, b,
			       &out->launch[out->nlaunch++]);
	else
		kt_gemm_launch(&y2, pg2, T, mb, r, B_G, r, T * r, B_W2, r, mb * r,
			       bm ? B_Y : B_Y2, m, mb, b, &out->launch[out->nlaunch++]);
	if (bm || y_direct)
		return 0;
	/* naive keeps the textbook element-wise permutation (the baseline) */
	l = &out->launch[out->nlaunch++];
	if (relayout) {
		perm_launch(s, tgt, pm, l);
	} else {
		kt_launch_elem(l, pm, "monarch_perm_out", (long long)T * m);
		y2_to_y_args(l, T, m, b);
	}
	return 0;
}

static int monarch_ref_plan(const struct kt_family *f, const struct kt_shape *s,
			    const struct kt_target *tgt, struct kt_plan *out, struct kt_err *err)
{
	const int bm = block_major(f);
	struct kt_launch *l;
	char why[200];
	long T = s->v[D_TOKENS], n = s->v[D_IN], m = s->v[D_OUT], b = s->v[D_BLOCKS];
	long r = s->v[D_RANK];

	memset(out, 0, sizeof(*out));
	if (shape_check(s, why, sizeof(why)))
		return kt_err_set(err, KT_EINVAL, "monarch: %s", why);
	out->nprograms = 1;
	out->programs[0].tpl = "monarch";
	out->nlaunch = 2;
	kt_ref_block_gemm_launch(&out->launch[0], 0, "monarch_ref_z", T, n, b, r, B_X, B_W1, B_Z32);
	l = kt_launch_elem(&out->launch[1], 0, "monarch_ref_y", (long long)T * m);
	kt_launch_arg_buf(l, B_Z32);
	kt_launch_arg_buf(l, B_W2);
	kt_launch_arg_buf(l, B_Y);
	kt_launch_arg_i32(l, T);
	kt_launch_arg_i32(l, m);
	kt_launch_arg_i32(l, b);
	kt_launch_arg_i32(l, r);
	kt_launch_arg_i32(l, bm);
	(void)tgt;
	return 0;
}

/* Double accumulation, one token at a time: z for all blocks (b*r values),
 * then every output through both permutations. Needs only b | in, out,
 * rank (not the GEMM alignment), so tests can use tiny odd shapes. */
static int monarch_cpu_ref(const struct kt_family *f, const struct kt_shape *s,
			   const void *const *in, float *const *out, struct kt_err *err)
{
	const int bm = block_major(f);
	const uint16_t *x = in[B_X], *w1 = in[B_W1], *w2 = in[B_W2];
	long T = s->v[D_TOKENS], n = s->v[D_IN], m = s->v[D_OUT], b = s->v[D_BLOCKS];
	long r = s->v[D_RANK], mb, rp, t, j, o, q;
	double *z = NULL;
	int rc = -1;

	if (b < 1 || n % b || m % b || r % b) {
		kt_err_set(err, KT_EINVAL, "monarch: blocks=%ld must divide in, out and rank", b);
		goto out;
	}
	mb = m / b;
	rp = r / b;
	if (!(z = malloc(sizeof(double) * (size_t)(b * r)))) {
		kt_err_set(err, KT_EINTERNAL, "monarch: out of memory for the reference");
		goto out;
	}
	for (t = 0; t < T; t++) {
		kt_cpu_block_gemm_row(x, w1, t, n, b, r, z);
		for (o = 0; o < m; o++) {
			long i = o % b, sidx = o / b;
			double acc = 0;

			for (j = 0; j < b; j++)
				for (q = 0; q < rp; q++)
					acc += z[j * r + q * b + i] *
					       (double)kt_bf16_to_f32(w2[(i * mb + sidx) * r + j * rp + q]);
			out[0][t * m + (bm ? i * mb + sidx : o)] = (float)acc;
		}
	}
	rc = 0;
out:
	free(z);
	return rc;
}

static double monarch_flops(const struct kt_family *f, const struct kt_shape *s)
{
	return 2.0 * s->v[D_TOKENS] * s->v[D_RANK] * (double)(s->v[D_IN] + s->v[D_OUT]);
}

static double monarch_min_bytes(const struct kt_family *f, const struct kt_shape *s)
{
	double T = s->v[D_TOKENS], n = s->v[D_IN], m = s->v[D_OUT], r = s->v[D_RANK];

	return 2.0 * (T * n + r * (n + m) + T * m);
}

/* fused_ws below rank/blocks 64, where its sweep winners beat relayout_ws's
 * default (docs/families/monarch.md, "The default"): at rank/blocks 16
 * (llama1b q/o) BLOCK_M 128, RING 5, EPILOGUE 3 (monarch_bm: 1) where that
 * grid is one wave of the SMs, else BLOCK_M 64, RING 6, EPILOGUE 1; at 48
 * (gpt2s c_fc) BLOCK_M 128, RING 5, EPILOGUE 1 within one wave only (past
 * it the column tiles' recomputed S1 loses). Not at 32: no reference layer
 * measured it. 1 with out set, else 0. */
static int small_fused(const struct kt_shape *s, const struct kt_target *tgt, int bm,
		       struct kt_config *out)
{
	const long rp = s->v[D_RANK] / s->v[D_BLOCKS];
	char why[200];
	int wave;

	if (rp != 16 && rp != 48)
		return 0;
	memset(out, 0, sizeof(*out));
	out->variant = V_FUSED_WS;
	out->p[P_CLI] = 1;
	out->p[P_CLT] = 1;
	out->p[P_BM] = 128;
	out->p[P_RING] = 5;
	out->p[P_EPI] = 1;
	/* BLOCK_M 128's grid one wave, resident at once */
	wave = tgt->sms > 0 && fused_grid(s, out) <= tgt->sms;
	if (wave && rp == 16 && !bm)
		out->p[P_EPI] = 3;
	if (!wave && rp == 16) {
		out->p[P_BM] = 64;
		out->p[P_RING] = 6;
	}
	if (!wave && rp == 48)
		return 0;
	return monarch_check(&monarch_family, s, out, tgt, why, sizeof(why)) == 0;
}

/* On sm_90a below rank/blocks 64, small_fused's; at 64 and above, where the
 * shape takes it, the winner of the whole fused_ws space at llama7b q/k/v/o
 * N1024: BLOCK_M 128 (64 for few tokens), RING 6, no clusters, and for
 * monarch EPILOGUE 3 where the target's SM count is known (its
 * co-residency check), else EPILOGUE 1 (monarch_bm's rows are
 * contiguous: EPILOGUE 3 is monarch's only). EPILOGUE 1 is checked as
 * monarch's, whose rules are monarch_bm's and more. Else, on sm_90a,
 * relayout_ws: BLOCK_M 128, two consumers, STAGES 4, BLOCK_N the largest of
 * 256 .. 32 not past out/blocks, Z_BLOCK_N the largest dividing rank and
 * GSTORE 1 where rank/blocks >= 32 (shorter runs gain nothing), the tile
 * that won the whole relayout_ws space at each of the four N1024 reference
 * shapes fused_ws refuses (docs/families/monarch.md); both stages on the
 * persistent walk (PERSISTENT 3: faster or level at every shape measured,
 * the same page); then BLOCK_M 64 with one consumer, one CTA per tile
 * (the walk unmeasured there). On sm_90 for 32 tokens or fewer, and where
 * tokens x rank <= 65536 (few tokens of a small layer), the decode tile
 * below.
 * Else (other targets) naive: stage 2's tile from the GEMM defaults list
 * (it has the larger N in the reference shapes), stage 1's N tile the
 * largest that still fits. */
static int monarch_default(const struct kt_family *f, const struct kt_shape *s,
			   const struct kt_target *tgt, struct kt_config *out)
{
	static const int idx[8] = {P_BM, P_BN, P_BK, P_WM, P_WN, P_STAGES, P_GROUP, P_ZBN};
	static const long fused_bm[] = {128, 64};
	const int bm = block_major(f);
	char why[200];
	size_t k;
	int e3;
	/* on sm_90 the decode tile below: for 32 tokens or fewer (under the
	 * ws tiles, which refuse them), and for few tokens of a small layer,
	 * where it beat relayout_ws's default: tokens x rank <= 65536 (it won
	 * at llama1b q/o and gpt2s c_fc up to 256 tokens, lost at llama7b's
	 * layers at 64 and at 1024 tokens: docs/families/monarch.md) */
	const int decode = tgt->sm == 90 &&
			   (s->v[D_TOKENS] <= 32 || s->v[D_TOKENS] * s->v[D_RANK] <= 65536);

	if (shape_check(s, why, sizeof(why)))
		return -1;
	if (tgt->sm == 90 && tgt->arch_a && !decode && small_fused(s, tgt, bm, out))
		return 0;
	/* EPILOGUE 3 (the interleave in the fused kernel) where its grid is
	 * known to be resident at once, else EPILOGUE 1 (+ monarch_perm_x8) */
	for (k = 0; tgt->sm == 90 && tgt->arch_a && s->v[D_RANK] / s->v[D_BLOCKS] >= 64 &&
		    k < sizeof(fused_bm) / sizeof(fused_bm[0]);
	     k++)
		for (e3 = !bm && tgt->sms > 0; e3 >= 0; e3--) {
			memset(out, 0, sizeof(*out));
			out->variant = V_FUSED_WS;
			out->p[P_BM] = fused_bm[k];
			out->p[P_RING] = 6;
			out->p[P_EPI] = e3 ? 3 : 1;
			out->p[P_CLI] = 1;
			out->p[P_CLT] = 1;
			if (monarch_check(&monarch_family, s, out, tgt, why, sizeof(why)) == 0)
				return 0;
		}
	for (k = 0; tgt->sm == 90 && tgt->arch_a && !decode && k < 2; k++) {
		static const long tiles[] = {256, 128, 64, 32};
		size_t n, z;

		for (n = 0; n < 3 && tiles[n] > s->v[D_OUT] / s->v[D_BLOCKS]; n++)
			;
		for (z = 0; z < 3 && s->v[D_RANK] % tiles[z]; z++)
			;
		memset(out, 0, sizeof(*out));
		out->variant = V_RELAYOUT_WS;
		out->p[P_BM] = k ? 64 : 128;
		out->p[P_CONS] = k ? 1 : 2;
		out->p[P_BN] = tiles[n];
		out->p[P_ZBN] = tiles[z];
		out->p[P_STAGES] = 4;
		out->p[P_GROUP] = 8;
		out->p[P_GSTORE] = s->v[D_RANK] / s->v[D_BLOCKS] >= 32;
		out->p[P_PERSIST] = k ? 0 : 3;
		if (monarch_check(f, s, out, tgt, why, sizeof(why)) == 0)
			return 0;
	}
	/* decode: relayout (naive where rank/blocks % 8) with the tile that won
	 * random samples of naive and relayout at each of the four N16
	 * reference shapes, then GSTORE 1 (no copy launch between the stages),
	 * YSTORE 1 for monarch (no permutation launch after them) and PDL 1
	 * (stage 2 loading its first w2 stages while stage 1 finishes): each
	 * took a launch or a wait off the critical path at every shape measured
	 * (docs/families/monarch.md, bench/results/monarch_decode.json) */
	if (decode) {
		memset(out, 0, sizeof(*out));
		out->variant = (s->v[D_RANK] / s->v[D_BLOCKS]) % 8 ? V_NAIVE : V_RELAYOUT;
		out->p[P_GSTORE] = out->variant == V_RELAYOUT;
		out->p[P_YSTORE] = out->variant == V_RELAYOUT && !bm;
		out->p[P_PDL] = out->variant == V_RELAYOUT;
		out->p[P_BM] = 16;
		out->p[P_BN] = 32;
		out->p[P_ZBN] = 32;
		out->p[P_BK] = 64;
		out->p[P_WM] = 1;
		out->p[P_WN] = 2;
		out->p[P_STAGES] = 4;
		out->p[P_GROUP] = 8;
		if (monarch_check(f, s, out, tgt, why, sizeof(why)) == 0)
			return 0;
	}
	return kt_gemm_default_staged(&monarch_family, s, tgt, s->v[D_TOKENS],
				      s->v[D_OUT] / s->v[D_BLOCKS], s->v[D_RANK], V_NAIVE, idx, out);
}

/* Both families run the same code; priv says where y lands. */
#define MONARCH_FAMILY(NAME, SUMMARY, LAYOUT) {				\
	.name = NAME,							\
	.summary = SUMMARY,						\
	.hidden = 0,							\
	.ndims = 5,							\
	.dims = dims,							\
	.nvariants = V_COUNT,						\
	.variants = variants,						\
	.planted = 0,							\
	.nparams = (int)(sizeof(params) / sizeof(params[0])),		\
	.params = params,						\
	.tol = 1e-2,							\
	.priv = LAYOUT,							\
	.check = monarch_check,						\
	.buffers = monarch_buffers,					\
	.plan = monarch_plan,						\
	.ref_plan = monarch_ref_plan,					\
	.cpu_ref = monarch_cpu_ref,					\
	.fill = NULL,							\
	.flops = monarch_flops,						\
	.min_bytes = monarch_min_bytes,					\
	.default_config = monarch_default,				\
	.prepare_plan = monarch_prepare_plan,				\
}

const struct kt_family monarch_family = MONARCH_FAMILY(
	"monarch", "y = x W^T with W a Monarch matrix (w1 (b, r, in/b), w2 (b, out/b, r)), bf16",
	&layouts[0]);

/* (3): the same layer with y left block-major, y[t][i*mb + s] = y2[i][t][s]
 * (the interleaving permutation dropped); the next layer's weights must be
 * pre-permuted offline to read it (its input column i*mb + s is the
 * canonical column s*b + i). A separate family because the output layout
 * is part of the problem: one reference per problem, every config checked
 * against it. */
const struct kt_family monarch_bm_family = MONARCH_FAMILY(
	"monarch_bm",
	"monarch with y left block-major (column i*out/blocks + s, not s*blocks + i): "
	"the next layer's weights pre-permuted offline, no output permutation",
	&layouts[1]);
