/*
 * blast.c -- the `blast` family: a BLAST structured linear layer, y (tokens
 * x out) = x (tokens x in) . W^T, W given by U (b, m/b, r), V (b, r, n/b)
 * and S (b, b, r), bf16, fp32 accumulation; block (i, j) of W is
 * U_i . diag(S[i][j]) . V_j (docs/kernels.md; nb = n/b, mb = m/b):
 *   z[j] = x[:, j*nb ..] . V_j^T                    stage 1 (N x r per block)
 *   w[i][t][c] = sum_j S[i][j][c] * z[j][t][c]       the mixing (2Nrb^2 FLOPs)
 *   y[:, i*mb ..] = w[i] . U_i^T                     stage 3 (N x mb per block)
 *
 * Variants (docs/families/blast.md says how each works and where it wins).
 * The GEMM stages are templates/gemm.cu's batched GEMMs on mma.sync,
 * wgmma or the warp-specialized TMA kernel; the mixers are templates/blast.cu:
 *   naive, naive_wgmma, naive_ws   three kernels, the mixing on CUDA cores
 *   mix_fused, mix_fused_ws        stage 1 and the mixing in one kernel
 *                                  (z stays in shared memory), then stage 3
 *   tcmix, tcmix_ws                the mixing on tensor cores (blocks <= 16);
 *                                  tcmix_ws: PERSISTENT stages, L2 hints
 *   tcmix_fused                    stage 1 on wgmma + the tensor-core mixing
 *                                  in one kernel (templates/blast_s1tc.cu)
 *   fused_cl                       the whole layer in one thread-block
 *                                  cluster kernel (templates/blast_fused.cu)
 * Why so many: z and w (b*N*r each) decide the time. Three kernels move both
 * through memory; the fused forms keep z (or both) on chip but are bound by
 * what an SM takes in, or by latency at small shapes. The sweep decides.
 * NEEDSWORK: token chunking (CHUNK_N, z and w of a chunk kept in L2) needs a
 * buffer offset in struct kt_arg or a chunk index in gemm_tn, and more than
 * KT_MAX_LAUNCHES launches (chunks as separate pipelines lose to per-kernel
 * latency). The mixers' CTA shapes are fixed, not searched.
 *
 * Shape: tokens 1..2^20; in, out 16..65536; blocks 1..256 and rank 8..65536
 * (both structural). check() requires blocks to divide in and out, and
 * in/blocks, out/blocks and rank to be multiples of 8 (the GEMMs move
 * 16-byte chunks along K and need N, ldc and batch strides in 8s; the mixer
 * moves RV-element vectors). rank need not be a multiple of blocks.
 */
#include "family.h"
#include "gemm_plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { D_TOKENS, D_IN, D_OUT, D_BLOCKS, D_RANK };
/* new variants go last: stored configs keep their variant index */
enum { V_NAIVE, V_NAIVE_WGMMA, V_NAIVE_WS, V_MIX_FUSED, V_MIX_FUSED_WS, V_TCMIX, V_TCMIX_WS,
       V_FUSED_CL, V_TCMIX_FUSED, V_COUNT };
/* problem buffers first (x, U, V, S, y, the reference's z32 and w32), then
 * the variants' scratch */
enum { B_X, B_U, B_V, B_S, B_Y, B_Z32, B_W32, B_W, B_S32, B_Z };
#define B_ST B_S32	/* tcmix: the slot of S32 holds St instead */
enum { P_BM, P_BN, P_ZBN, P_BK, P_WM, P_WN, P_STAGES, P_GROUP, P_CONSUMERS, P_PERSIST,
       P_CTA_BLOCKS, P_FUSED_M, P_RING, P_PDL, P_L2 };

#define NPROBLEM_BUFS 7
#define MIX_WARPS 8			/* warps per mixer CTA (rank vectors) */
#define TC_R 64		/* tcmix: ranks per CTA of blast_mix_tcp, 4 warps, and */
#define TP_T 8		/* tokens per tile (templates/blast.cu says the same) */
#define TC_THREADS 128
/* its dynamic shared memory: a ring of 3 tiles of 16 slots of TP_T rows
 * of 144 bytes, slots 32 bytes apart */
#define TP_SMEM (3 * 16 * (TP_T * (TC_R * 2 + 16) + 32))
#define TP_CTAS_PER_SM 3	/* what fits: 164 registers, 56,832 B */

static const struct kt_dim dims[] = {
	{"tokens", 1, 1L << 20, 0, "rows of x (batch x sequence)"},
	{"in", 16, 65536, 0, "input features n; in/blocks a multiple of 8"},
	{"out", 16, 65536, 0, "output features m; out/blocks a multiple of 8"},
	{"blocks", 1, 256, 1, "BLAST blocks b; divides in and out"},
	{"rank", 8, 65536, 1, "rank r shared by all blocks; a multiple of 8"},
};

static const char *const variants[] = {"naive",	"naive_wgmma", "naive_ws", "mix_fused",
					"mix_fused_ws", "tcmix",	    "tcmix_ws", "fused_cl",
					"tcmix_fused"};

#define MMA ((1u << V_NAIVE) | (1u << V_MIX_FUSED) | (1u << V_MIX_FUSED_WS) | (1u << V_TCMIX))
#define WG (1u << V_NAIVE_WGMMA)
#define WS ((1u << V_NAIVE_WS) | (1u << V_MIX_FUSED_WS) | (1u << V_TCMIX_WS))
#define ALLV (MMA | WG | WS)
#define FCL (1u << V_FUSED_CL)
#define TCF (1u << V_TCMIX_FUSED)

static const struct kt_param params[] = {
	{"BLOCK_M", 5, {16, 32, 64, 128, 256}, ALLV | FCL | TCF,
	 "token tile of both GEMM stages (fused_cl: of the cluster, 32 or 64; tcmix_fused: of "
	 "stage 3)"},
	{"BLOCK_N", 4, {32, 64, 128, 256}, ALLV | TCF, "out/blocks tile of stage 3"},
	{"Z_BLOCK_N", 4, {32, 64, 128, 256}, ALLV | TCF,
	 "rank tile of stage 1 (mix_fused: of the fused stage-1 + mixing kernel; tcmix_fused: "
	 "its rank slice, 32 or 64)"},
	{"BLOCK_K", 2, {32, 64}, MMA, "k-tile per pipeline stage (wgmma: 64)"},
	{"WARPS_M", 3, {1, 2, 4}, MMA, "warps along tokens (wgmma: BLOCK_M/16)"},
	{"WARPS_N", 3, {1, 2, 4}, MMA, "warps along rank / out (wgmma: 1)"},
	{"STAGES", 5, {2, 3, 4, 6, 8}, ALLV | FCL | TCF, "cp.async / TMA ring depth"},
	{"GROUP_M", 1, {8}, ALLV | TCF, "tile rows walked together for L2 reuse"},
	{"CONSUMERS", 2, {1, 2}, WS,
	 "ws GEMM stages: consumer warpgroups (each BLOCK_M/CONSUMERS rows) beside the TMA "
	 "producer"},
	{"PERSISTENT", 4, {0, 1, 2, 3}, (1u << V_TCMIX_WS) | FCL,
	 "ws stages on gemm.cu's persistent kernel (one CTA per SM walking the tiles): "
	 "0 none, 1 stage 1, 2 stage 3, 3 both; fused_cl: 1 = clusters that hold their "
	 "blocks' V and U and walk the token tiles (0: weights streamed per tile)"},
	{"CTA_BLOCKS", 4, {1, 2, 3, 4}, FCL,
	 "fused_cl: blocks per CTA (G): clusters of blocks / G CTAs, each owning G blocks and "
	 "rank / (blocks / G) ranks of the mixing"},
	{"FUSED_M", 2, {64, 128}, TCF,
	 "tcmix_fused: token tile of the stage-1 + mixing kernel (64 per consumer warpgroup)",
	 1, 64},
	{"RING", 4, {4, 6, 8, 12}, TCF,
	 "tcmix_fused: TMA ring slots of the stage-1 + mixing kernel (one slot: a 64-wide "
	 "k-chunk of x and of V; 4 issuing threads where 4 divides it, else 2)", 1, 4},
	/* optional: keys from before it mean three plain launches */
	{"PDL", 2, {0, 1}, 1u << V_TCMIX,
	 "tcmix (sm_90+): 1 the mixer and stage 3 are programmatic dependent launches (stage "
	 "3 loading its first U stages while the mixer finishes), 0 plain launches",
	 1, 0},
	/* optional: keys from before it mean no hints */
	{"L2", 3, {0, 1, 2}, 1u << V_TCMIX_WS,
	 "tcmix_ws (rank a multiple of 64): 1 the mixer discards z's L2 lines once read, so that "
	 "stage 1's dirty lines are never written back and w takes their room; 2 that, with x, V "
	 "and U loaded evict_first and z, w stored evict_last; 0 neither",
	 1, 0},
};

/* Ranks per mixer thread: its b vectors of z stay in registers (b * RV <=
 * 128 fp32); over 64 blocks one rank per thread and z re-read from L1.
 * templates/blast.cu derives the same from MIX_B: change both together. */
static long mix_rv(long b)
{
	return b <= 16 ? 8 : b <= 32 ? 4 : b <= 64 ? 2 : 1;
}

/* A tile on gemm.cu's warp-specialized path (TMA ring, a producer
 * warpgroup, CONSUMERS wgmma warpgroups, staged epilogue). */
static void ws_tile(struct kt_gemm_tile *t, const struct kt_config *c)
{
	t->ws = 1;
	t->consumers = c->p[P_CONSUMERS] > 0 ? c->p[P_CONSUMERS] : 1;
	kt_gemm_tile_wg(t);
}

/* s1 is stage 1's tile (mix_fused: the fused kernel's), s3 stage 3's. They
 * share all but their N, except that mix_fused_ws runs stage 3 on the ws
 * path (BLOCK_K, WARPS_* then apply to the fused kernel only). */
static void tiles_of(const struct kt_config *c, const struct kt_target *tgt,
		     struct kt_gemm_tile *s1, struct kt_gemm_tile *s3)
{
	kt_gemm_tile_set(s3, c->p[P_BM], c->p[P_BN], c->p[P_BK], c->p[P_WM], c->p[P_WN],
			 c->p[P_STAGES], c->p[P_GROUP], c->variant == V_NAIVE_WGMMA);
	if (c->variant == V_NAIVE_WS || c->variant == V_TCMIX_WS)
		ws_tile(s3, c);
	if (c->variant == V_TCMIX_FUSED) {
		/* stage 3 as tcmix_ws's winners ran it: two consumer
		 * warpgroups (one for a 64-token tile), one tile per CTA
		 * (keeps the space small) */
		ws_tile(s3, c);
		s3->consumers = s3->bm >= 128 ? 2 : 1;
	}
	*s1 = *s3;
	s1->bn = c->p[P_ZBN];
	if (c->variant == V_MIX_FUSED_WS)
		ws_tile(s3, c);
	if (c->variant == V_TCMIX_WS || c->variant == V_TCMIX_FUSED) {
		const long ctas = kt_gemm_walk_ctas(tgt);

		s1->persistent = c->p[P_PERSIST] & 1 ? ctas : 0;
		s3->persistent = c->p[P_PERSIST] & 2 ? ctas : 0;
		/* its three kernels overlap each other's launch and tail
		 * (tcmix_fused: s1 is not a GEMM; its fused kernel and stage 3) */
		s1->pdl = s3->pdl = 1;
	}
	/* tcmix_ws's L2 2 as gemm.cu's L2_HINT: stage 1 streams x (A) and V
	 * (B) and stores z (C) for the mixer; stage 3 streams U (B); the
	 * mixer's own bits are blast_plan's MIX_L2 */
	if (c->variant == V_TCMIX_WS && c->p[P_L2] == 2) {
		s1->l2 = 1 | 2 | 4;
		s3->l2 = 2;
	}
	/* tcmix's PDL: gemm.cu's PDL prologue in both stages (V and U are
	 * nobody's output); blast_plan leaves stage 1, the first launch
	 * after the timer's L2 flush, unflagged */
	if (c->variant == V_TCMIX && c->p[P_PDL] == 1)
		s1->pdl = s3->pdl = 1;
}

static int is_fused(int variant)
{
	return variant == V_MIX_FUSED || variant == V_MIX_FUSED_WS;
}

/* the tensor-core mixer (blast.cu's blast_mix_tcp) */
static int is_tc(int variant)
{
	return variant == V_TCMIX || variant == V_TCMIX_WS;
}

#define WHY(...) (snprintf(why, whylen, __VA_ARGS__), 1)

/* The structural rules, independent of the config. */
static int shape_check(const struct kt_shape *s, char *why, size_t whylen)
{
	long n = s->v[D_IN], m = s->v[D_OUT], b = s->v[D_BLOCKS], r = s->v[D_RANK];

	if (b < 1 || n % b || m % b)
		return WHY("blocks=%ld must divide in=%ld and out=%ld", b, n, m);
	if ((n / b) % 8 || (m / b) % 8 || r % 8)
		return WHY("in/blocks=%ld, out/blocks=%ld and rank=%ld must be multiples of 8 "
			   "(16-byte GEMM copies)", n / b, m / b, r);
	return 0;
}

/* mix_fused: the b bf16 z tiles beside the main loop's ring, rows padded
 * by 8 (templates/blast.cu's ZLD). */
static unsigned fused_zsmem(const struct kt_gemm_tile *s1, long b)
{
	return (unsigned)(b * s1->bm * (s1->bn + 8) * 2);
}

/* The fused kernel's mixing phase keeps b * RV fp32 z values per thread
 * (b <= 64) under __launch_bounds__(threads, 1): they must fit the
 * register file's share of each thread. */
static int fused_check(const struct kt_gemm_tile *s1, long b, const struct kt_target *tgt,
		       char *why, size_t whylen)
{
	long threads = (long)kt_gemm_threads(s1);
	long regs = b <= 64 ? b * mix_rv(b) + 48 : 48;

	if (regs * threads > 65536 || regs > 255)
		return WHY("mix_fused: %ld threads x ~%ld registers (z of %ld blocks) exceed the "
			   "register file", threads, regs, b);
	if ((long)kt_gemm_smem(s1) + (long)fused_zsmem(s1, b) > tgt->smem_optin)
		return WHY("mix_fused: shared memory %u B ring + %u B z tiles > %d B opt-in limit",
			   kt_gemm_smem(s1), fused_zsmem(s1, b), tgt->smem_optin);
	return 0;
}

/* S as St (r, 16, 16): the tensor-core mixers' layout */
static int uses_st(int variant)
{
	return is_tc(variant) || variant == V_FUSED_CL || variant == V_TCMIX_FUSED;
}

#define FCL_THREADS 256

/* fused_cl's dynamic shared memory, as templates/blast_fused.cu lays it
 * out, bf16: streaming (PERSISTENT 0) the copy ring (slots of max(T + r,
 * 128) rows of 128 bytes), resident (1) the G blocks' V (r x nb) and U
 * (mb x r) and x (T x nb) twice; then zT and WL (G, r, T + 8 each), GB (16
 * blocks of r / C x (T + 8), 16 bytes apart), WX (b, r / C, T + 8) and the
 * exchange's two mbarriers. */
static long fcl_smem(const struct kt_shape *s, const struct kt_config *c)
{
	long n = s->v[D_IN], m = s->v[D_OUT], b = s->v[D_BLOCKS], r = s->v[D_RANK];
	long T = c->p[P_BM], G = c->p[P_CTA_BLOCKS], nb = n / b, mb = m / b;
	long ldt = T + 8, rs = r / (b / G), slice = rs * ldt * 2;
	long tiles = 2 * G * r * ldt * 2 + 16 * (slice + 16) + b * slice + 16;

	if (c->p[P_PERSIST] == 1)
		return G * (r * nb + mb * r + 2 * T * nb) * 2 + tiles;
	return c->p[P_STAGES] * (T + r > 128 ? T + r : 128) * 128 + tiles;
}

/* CTAs per cluster: the 16 that llama1b's blocks take by default need the
 * non-portable opt-in that the worker gives every sm_90 kernel */
static long fcl_cluster(const struct kt_shape *s, const struct kt_config *c)
{
	return c->p[P_CTA_BLOCKS] > 0 ? s->v[D_BLOCKS] / c->p[P_CTA_BLOCKS] : 0;
}

static int fcl_check(const struct kt_shape *s, const struct kt_config *c,
		     const struct kt_target *tgt, char *why, size_t whylen)
{
	long n = s->v[D_IN], m = s->v[D_OUT], b = s->v[D_BLOCKS], r = s->v[D_RANK];
	long T = c->p[P_BM], G = c->p[P_CTA_BLOCKS], st = c->p[P_STAGES];
	long nb = n / b, mb = m / b, cl, wm1, smem;

	if (tgt->sm < 90)
		return WHY("fused_cl: thread-block clusters and distributed shared memory need "
			   "sm_90+, target is sm_%d", tgt->sm);
	if (b > 16)
		return WHY("fused_cl: blocks=%ld > 16 (a cluster holds at most 16 CTAs, S_c one "
			   "16 x 16 mma tile)", b);
	if (T != 32 && T != 64)
		return WHY("fused_cl: BLOCK_M=%ld: the cluster's token tile is 32 or 64", T);
	if (G < 1 || b % G)
		return WHY("fused_cl: CTA_BLOCKS=%ld must divide blocks=%ld", G, b);
	if (st < 2 || st > 4)
		return WHY("fused_cl: STAGES=%ld: 2 to 4 ring slots", st);
	if (c->p[P_PERSIST] < 0 || c->p[P_PERSIST] > 1)
		return WHY("fused_cl: PERSISTENT=%ld: 0 (streamed weights) or 1 (resident)",
			   c->p[P_PERSIST]);
	if (c->p[P_PERSIST] == 1 && st != 2)
		return WHY("fused_cl: STAGES=%ld with PERSISTENT=1: the resident kernel has no "
			   "ring (STAGES 2 stands for it)", st);
	cl = b / G;
	if (r % 64 || r % (8 * cl))
		return WHY("fused_cl: rank=%ld must be a multiple of 64 and of 8 x %ld (the "
			   "cluster's CTAs)", r, cl);
	wm1 = 8 / (T / 32);
	if ((r / 16) % wm1 || r / 16 / wm1 > 8)
		return WHY("fused_cl: rank=%ld: stage 1's %ld warps along the rank take 1 to 8 "
			   "16-rank tiles each", r, wm1);
	if (nb % 64 || mb % 128)
		return WHY("fused_cl: in/blocks=%ld must be a multiple of 64 and out/blocks=%ld "
			   "of 128", nb, mb);
	if (FCL_THREADS > tgt->max_threads)
		return WHY("fused_cl: %d threads per block, target has %d", FCL_THREADS,
			   tgt->max_threads);
	smem = fcl_smem(s, c);
	if (smem > tgt->smem_optin)
		return WHY("fused_cl: %ld B of shared memory (ring, z and w tiles) > %d B opt-in "
			   "limit", smem, tgt->smem_optin);
	return 0;
}

/* tcmix_fused's stage-1 + mixing kernel (templates/blast_s1tc.cu): its
 * dynamic shared memory (1024 for alignment; the ring, which after the j
 * loop holds a w staging tile of rank-slice x 512 bytes per consumer warp;
 * a z tile of that size per warp; St's slice; the barriers). On the H200's
 * 227 KiB only FUSED_M 64 with a rank slice of 32 fits (up to 12 slots). */
static long s1tc_smem(const struct kt_config *c)
{
	long fm = c->p[P_FUSED_M], rs = c->p[P_ZBN];
	long ring = c->p[P_RING] * (fm + rs) * 128, tiles = (fm / 16) * rs * 512;

	return 1024 + (ring > tiles ? ring : tiles) + tiles + rs / 8 * 4096 + 256;
}

static int s1tc_check(const struct kt_shape *s, const struct kt_config *c,
		      const struct kt_target *tgt, char *why, size_t whylen)
{
	long n = s->v[D_IN], b = s->v[D_BLOCKS], r = s->v[D_RANK];
	long fm = c->p[P_FUSED_M], rs = c->p[P_ZBN], ring = c->p[P_RING];
	long kch = (n / b + 63) / 64, threads = (fm / 64 + 1) * 128;

	if (!tgt->arch_a)
		return WHY("tcmix_fused: wgmma and TMA need sm_90a, target is sm_%d", tgt->sm);
	if (b > 16)
		return WHY("tcmix_fused: blocks=%ld > 16 (S_c is one 16 x 16 mma tile)", b);
	if (fm != 64 && fm != 128)
		return WHY("tcmix_fused: FUSED_M=%ld: 64 or 128 tokens (one or two consumer "
			   "warpgroups)", fm);
	if (rs != 32 && rs != 64)
		return WHY("tcmix_fused: Z_BLOCK_N=%ld: the rank slice is 32 or 64", rs);
	if (r % rs)
		return WHY("tcmix_fused: rank=%ld is not a multiple of the rank slice %ld", r, rs);
	if (ring < kch || ring < 2 || ring > 15)
		return WHY("tcmix_fused: RING=%ld slots cannot hold one block's %ld k-chunks "
			   "(in/blocks=%ld)", ring, kch, n / b);
	if (threads > tgt->max_threads)
		return WHY("tcmix_fused: %ld threads per block, target has %d", threads,
			   tgt->max_threads);
	if (s1tc_smem(c) > tgt->smem_optin)
		return WHY("tcmix_fused: %ld B of shared memory (ring and z tiles) > %d B opt-in "
			   "limit", s1tc_smem(c), tgt->smem_optin);
	return 0;
}

static int blast_check(const struct kt_family *f, const struct kt_shape *s,
		       const struct kt_config *c, const struct kt_target *tgt, char *why,
		       size_t whylen)
{
	struct kt_gemm_tile s1, s3;
	long T = s->v[D_TOKENS], n = s->v[D_IN], m = s->v[D_OUT], b = s->v[D_BLOCKS];
	long r = s->v[D_RANK];

	if (c->variant < 0 || c->variant >= V_COUNT)
		return WHY("unknown variant %d", c->variant);
	if (shape_check(s, why, whylen))
		return 1;
	if (KT_ELEM_THREADS > tgt->max_threads || MIX_WARPS * 32 > tgt->max_threads)
		return WHY("the mixing kernels need %d threads per block, target has %d",
			   KT_ELEM_THREADS, tgt->max_threads);
	if (c->variant == V_FUSED_CL)
		return fcl_check(s, c, tgt, why, whylen);
	if (is_tc(c->variant) && b > 16)
		return WHY("%s: blocks=%ld > 16 (the mixer pads S_c to one 16 x 16 mma tile)",
			   variants[c->variant], b);
	if (is_tc(c->variant) && TC_THREADS > tgt->max_threads)
		return WHY("tcmix: the mixer needs %d threads per block, target has %d", TC_THREADS,
			   tgt->max_threads);
	if (is_tc(c->variant) && TP_SMEM > tgt->smem_optin)
		return WHY("tcmix: the mixer needs %d B of shared memory, target allows %d", TP_SMEM,
			   tgt->smem_optin);
	if (c->p[P_L2] < 0 || c->p[P_L2] > 2 || (c->p[P_L2] && c->variant != V_TCMIX_WS))
		return WHY("L2=%ld: 0, 1 or 2, tcmix_ws only", c->p[P_L2]);
	if (c->p[P_L2] && r % 64)
		return WHY("L2=%ld: discarding z needs rank=%ld a multiple of 64 (whole 128-byte "
			   "lines)", c->p[P_L2], r);
	tiles_of(c, tgt, &s1, &s3);
	if (c->variant == V_TCMIX_FUSED) {
		if (s1tc_check(s, c, tgt, why, whylen))
			return 1;
		return kt_gemm_check_space(&s3, T, m / b, r, 0, tgt, why, whylen);
	}
	if (is_fused(c->variant) && fused_check(&s1, b, tgt, why, whylen))
		return 1;
	if (kt_gemm_check_space(&s1, T, r, n / b, is_fused(c->variant) ? fused_zsmem(&s1, b) : 0,
			  tgt, why, whylen))
		return 1;
	return kt_gemm_check_space(&s3, T, m / b, r, 0, tgt, why, whylen);
}

static int blast_buffers(const struct kt_family *f, const struct kt_shape *s,
			 const struct kt_config *cfg, struct kt_buf out[KT_MAX_BUFS])
{
	size_t T = (size_t)s->v[D_TOKENS], n = (size_t)s->v[D_IN], m = (size_t)s->v[D_OUT];
	size_t b = (size_t)s->v[D_BLOCKS], r = (size_t)s->v[D_RANK];
	size_t nb = b ? n / b : n;

	/* Uniform (-a, a) has variance a^2/3. With a = sqrt(3/k) for a sum of
	 * k products each stage keeps the variance of x's entries (1/3):
	 * z sums nb terms, w sums b, y sums r -- y is O(1) (rms ~0.58)
	 * whatever the shape. */
	kt_buf_set(&out[B_X], "x", KT_BUF_INPUT, KT_BF16, T * n, 1.0);
	kt_buf_set(&out[B_U], "U", KT_BUF_INPUT, KT_BF16, m * r, sqrt(3.0 / (double)r));
	kt_buf_set(&out[B_V], "V", KT_BUF_INPUT, KT_BF16, r * n, sqrt(3.0 / (double)nb));
	kt_buf_set(&out[B_S], "S", KT_BUF_INPUT, KT_BF16, b * b * r, sqrt(3.0 / (double)b));
	kt_buf_set(&out[B_Y], "y", KT_BUF_OUTPUT, KT_BF16, T * m, 0);
	/* the GPU reference's fp32 intermediates: problem buffers */
	kt_buf_set(&out[B_Z32], "z32", KT_BUF_SCRATCH, KT_F32, b * T * r, 0);
	kt_buf_set(&out[B_W32], "w32", KT_BUF_SCRATCH, KT_F32, b * T * r, 0);
	if (!cfg || cfg->variant < 0 || cfg->variant >= V_COUNT)
		return NPROBLEM_BUFS;
	/* fused_cl keeps w on chip: its slot stays, 8 elements */
	kt_buf_set(&out[B_W], "w", KT_BUF_SCRATCH, KT_BF16,
		   cfg->variant == V_FUSED_CL ? 8 : b * T * r, 0);
	if (uses_st(cfg->variant))	/* S rank-major, each S_c padded to 16 x 16 */
		kt_buf_set(&out[B_ST], "St", KT_BUF_SCRATCH, KT_BF16, r * 256, 0);
	else
		kt_buf_set(&out[B_S32], "S32", KT_BUF_SCRATCH, KT_F32, b * b * r, 0);
	out[B_S32].prepared = 1;
	if (is_fused(cfg->variant) || cfg->variant == V_FUSED_CL || cfg->variant == V_TCMIX_FUSED)
		return 9;	/* z stays on chip */
	kt_buf_set(&out[B_Z], "z", KT_BUF_SCRATCH, KT_BF16, b * T * r, 0);
	return 10;
}

/* The fused stage 1 + mixing kernel of mix_fused (program pm, which
 * carries stage 1's tile defines). */
static void fused_launch(const struct kt_gemm_tile *s1, int pm, long T, long n, long b, long r,
			 struct kt_launch *l)
{
	long tm = (T + s1->bm - 1) / s1->bm, tn = (r + s1->bn - 1) / s1->bn;

	memset(l, 0, sizeof(*l));
	l->program = pm;
	snprintf(l->kernel, sizeof(l->kernel), "blast_s1mix");
	l->grid[0] = (unsigned)(tm * tn);
	l->grid[1] = l->grid[2] = 1;
	l->block[0] = kt_gemm_threads(s1);
	l->block[1] = l->block[2] = 1;
	l->smem = kt_gemm_smem(s1) + fused_zsmem(s1, b);
	kt_launch_arg_buf(l, B_X);
	kt_launch_arg_buf(l, B_V);
	kt_launch_arg_buf(l, B_S32);
	kt_launch_arg_buf(l, B_W);
	kt_launch_arg_i32(l, T);
	kt_launch_arg_i32(l, n);
	kt_launch_arg_i32(l, r);
}

/* The mixer of naive: one thread per (token, RV ranks), 32 tokens x
 * MIX_WARPS vectors per CTA. */
static void mix_launch(int pm, long T, long b, long r, struct kt_launch *l)
{
	long vecs = r / mix_rv(b);

	memset(l, 0, sizeof(*l));
	l->program = pm;
	snprintf(l->kernel, sizeof(l->kernel), "blast_mix");
	l->grid[0] = (unsigned)((T + 31) / 32);
	l->grid[1] = (unsigned)((vecs + MIX_WARPS - 1) / MIX_WARPS);
	l->grid[2] = 1;
	l->block[0] = 32;
	l->block[1] = MIX_WARPS;
	l->block[2] = 1;
	kt_launch_arg_buf(l, B_Z);
	kt_launch_arg_buf(l, B_S32);
	kt_launch_arg_buf(l, B_W);
	kt_launch_arg_i32(l, T);
	kt_launch_arg_i32(l, r);
}

/* tcmix's mixer, blast_mix_tcp: a 1-D grid of CTAs that blast.cu's
 * tp_assign deals the (rank tile of 64, token tile of TP_T) units to, any
 * grid size being correct. With the SM count known, as many CTAs as fit
 * at once (TP_CTAS_PER_SM per SM), so that every SM holds the same number
 * and they share the units evenly, but at least two units each (each CTA
 * first loads 32 KiB of St: llama1b's grid stays at 256); else
 * (compile-only) one unit per CTA. The grid of rank tiles x token runs
 * before left SMs of two CTAs beside SMs of three (llama7b N1024: 352
 * CTAs for 396 places) or four CTAs for a second wave (N16384: 400). */
static void mix_tc_launch(int pm, long T, long r, const struct kt_target *tgt, int pdl,
			  struct kt_launch *l)
{
	const long units = ((T + TP_T - 1) / TP_T) * ((r + TC_R - 1) / TC_R);
	long ctas = units;

	if (tgt->sms > 0) {
		const long slots = (long)TP_CTAS_PER_SM * tgt->sms;

		ctas = (units + 1) / 2;
		if (ctas > slots)
			ctas = slots;
	}
	memset(l, 0, sizeof(*l));
	l->program = pm;
	snprintf(l->kernel, sizeof(l->kernel), "blast_mix_tcp");
	l->grid[0] = (unsigned)(ctas < 0x7fffffffL ? ctas : 0x7fffffffL);
	l->grid[1] = 1;
	l->grid[2] = 1;
	l->block[0] = TC_THREADS;
	l->block[1] = l->block[2] = 1;
	l->smem = TP_SMEM;
	l->pdl = pdl;
	kt_launch_arg_buf(l, B_Z);
	kt_launch_arg_buf(l, B_ST);
	kt_launch_arg_buf(l, B_W);
	kt_launch_arg_i32(l, T);
	kt_launch_arg_i32(l, r);
}

/* The prep of the tensor-core mixers: St from S, in program pm (blast.cu
 * with MIX_B and MIX_TC). */
static void st_prep(struct kt_plan *out, int pm, long r)
{
	struct kt_launch *l;

	snprintf(out->transform, sizeof(out->transform),
		 "St[c][i][j] = S[i][j][c] for i, j < blocks, 0 up to 16: the mixing "
		 "weights rank-major, each S_c one 16 x 16 bf16 tile (St: rank x 256)");
	out->nprep = 1;
	l = kt_launch_elem(&out->prep[0], pm, "blast_s_to_t16", (long long)r * 256);
	kt_launch_arg_buf(l, B_S);
	kt_launch_arg_buf(l, B_ST);
	kt_launch_arg_i32(l, r);
}

/* Every prepared buffer of the space: St (the tensor-core mixers, fused_cl
 * and tcmix_fused; only where blocks <= 16, their limit) and S32 (the
 * others), both from blast.cu with MIX_B (and MIX_TC, which adds St's
 * kernel), the program fused_cl preps with. In its own slots: St at
 * B_ST, S32 at the next. */
static int blast_prepare_plan(const struct kt_family *f, const struct kt_shape *s,
			      const struct kt_target *tgt, struct kt_plan *out,
			      struct kt_buf bufs[KT_MAX_BUFS], int *nbufs, struct kt_err *err)
{
	long b = s->v[D_BLOCKS], r = s->v[D_RANK];
	struct kt_launch *l;
	int tc = b <= 16, i, rc = 0;

	(void)tgt;
	memset(out, 0, sizeof(*out));
	if (b < 1 || r < 1)
		return kt_err_set(err, KT_EINVAL, "blast: blocks and rank must be positive");
	blast_buffers(f, s, NULL, bufs);
	for (i = NPROBLEM_BUFS; i < B_ST; i++)
		kt_buf_set(&bufs[i], "", KT_BUF_SCRATCH, KT_BF16, 0, 0);
	kt_buf_set(&bufs[B_ST], tc ? "St" : "", KT_BUF_SCRATCH, KT_BF16, tc ? (size_t)r * 256 : 0, 0);
	bufs[B_ST].prepared = tc;
	kt_buf_set(&bufs[B_ST + 1], "S32", KT_BUF_SCRATCH, KT_F32, (size_t)(b * b * r), 0);
	bufs[B_ST + 1].prepared = 1;
	*nbufs = B_ST + 2;
	out->nprograms = 1;
	out->programs[0].tpl = "blast";
	rc |= kt_program_define(&out->programs[0], "MIX_B", b);
	if (tc)
		rc |= kt_program_define(&out->programs[0], "MIX_TC", 1);
	if (rc)
		return kt_err_set(err, KT_EINTERNAL, "blast: too many defines");
	if (tc)
		st_prep(out, 0, r);
	l = kt_launch_elem(&out->prep[out->nprep++], 0, "blast_s_to_f32", (long long)b * b * r);
	kt_launch_arg_buf(l, B_S);
	kt_launch_arg_buf(l, B_ST + 1);
	kt_launch_arg_i64(l, (long long)b * b * r);
	out->transform[0] = 0;
	return 0;
}

/* fused_cl: [blast MIX_B MIX_TC] for the prep, [blast_fused + the shape
 * and tile defines]; one launch of ceil(N / T) clusters of b / G CTAs. */
static int fcl_plan(const struct kt_shape *s, const struct kt_config *c,
		    const struct kt_target *tgt, struct kt_plan *out, struct kt_err *err)
{
	long T = s->v[D_TOKENS], n = s->v[D_IN], m = s->v[D_OUT], b = s->v[D_BLOCKS];
	long r = s->v[D_RANK], bm = c->p[P_BM], cl = fcl_cluster(s, c);
	long clusters = (T + bm - 1) / bm;
	struct kt_program *p = &out->programs[1];
	struct kt_launch *l = &out->launch[0];
	int rc = 0;

	out->nprograms = 2;
	out->programs[0].tpl = "blast";
	rc |= kt_program_define(&out->programs[0], "MIX_B", b);
	rc |= kt_program_define(&out->programs[0], "MIX_TC", 1);
	p->tpl = "blast_fused";
	rc |= kt_program_define(p, "FB_B", b);
	rc |= kt_program_define(p, "FB_R", r);
	rc |= kt_program_define(p, "FB_NB", n / b);
	rc |= kt_program_define(p, "FB_MB", m / b);
	rc |= kt_program_define(p, "FB_T", bm);
	rc |= kt_program_define(p, "FB_G", c->p[P_CTA_BLOCKS]);
	rc |= kt_program_define(p, "FB_STAGES", c->p[P_STAGES]);
	rc |= kt_program_define(p, "FB_RESIDENT", c->p[P_PERSIST]);
	if (rc)
		return kt_err_set(err, KT_EINTERNAL, "blast: too many defines");
	st_prep(out, 0, r);
	out->nlaunch = 1;
	memset(l, 0, sizeof(*l));
	l->program = 1;
	snprintf(l->kernel, sizeof(l->kernel), "fused_blast_cl");
	/* resident: the clusters that fit at once walk the token tiles. The
	 * H200 holds 7 of 16 CTAs (ncu: max active clusters), one CTA per SM;
	 * 7/8 of the SMs stands for the GPCs' spare SMs at other sizes. Any
	 * count is correct: more only queue behind. */
	if (c->p[P_PERSIST] == 1 && tgt->sms > 0) {
		long fit = tgt->sms * 7 / (8 * cl);

		if (fit < 1)
			fit = 1;
		if (clusters > fit)
			clusters = fit;
	}
	l->grid[0] = (unsigned)(clusters * cl);
	l->grid[1] = l->grid[2] = 1;
	l->block[0] = FCL_THREADS;
	l->block[1] = l->block[2] = 1;
	l->smem = (unsigned)fcl_smem(s, c);
	kt_launch_arg_buf(l, B_X);
	kt_launch_arg_buf(l, B_V);
	kt_launch_arg_buf(l, B_U);
	kt_launch_arg_buf(l, B_ST);
	kt_launch_arg_buf(l, B_Y);
	kt_launch_arg_i32(l, T);
	return 0;
}

/* tcmix_fused: [blast_s1tc + its tile] [gemm s3] [blast MIX_B MIX_TC] for
 * the prep; launches: the stage-1 + mixing kernel (blast_s1tc.cu's header
 * says its maps, grid and shared memory), then stage 3 from w. Both PDL. */
static int s1tc_plan(const struct kt_shape *s, const struct kt_config *c,
		     const struct kt_target *tgt, struct kt_plan *out, struct kt_err *err)
{
	struct kt_gemm_tile s1, s3;
	long T = s->v[D_TOKENS], n = s->v[D_IN], m = s->v[D_OUT], b = s->v[D_BLOCKS];
	long r = s->v[D_RANK], nb = n / b, mb = m / b, fm = c->p[P_FUSED_M], rs = c->p[P_ZBN];
	struct kt_program *p = &out->programs[0];
	struct kt_launch *l = &out->launch[0];
	int rc = 0;

	tiles_of(c, tgt, &s1, &s3);
	out->nprograms = 3;
	p->tpl = "blast_s1tc";
	rc |= kt_program_define(p, "ST_T", fm);
	rc |= kt_program_define(p, "ST_CONS", fm / 64);
	rc |= kt_program_define(p, "ST_RS", rs);
	rc |= kt_program_define(p, "ST_RING", c->p[P_RING]);
	rc |= kt_program_define(p, "KT_PDL", 1);
	out->programs[1].tpl = "gemm";
	rc |= kt_gemm_defines(&s3, &out->programs[1]);
	out->programs[2].tpl = "blast";
	rc |= kt_program_define(&out->programs[2], "MIX_B", b);
	rc |= kt_program_define(&out->programs[2], "MIX_TC", 1);
	if (rc)
		return kt_err_set(err, KT_EINTERNAL, "blast: too many defines");
	st_prep(out, 2, r);
	out->nlaunch = 2;
	memset(l, 0, sizeof(*l));
	l->program = 0;
	snprintf(l->kernel, sizeof(l->kernel), "fused_blast_s1tc");
	l->grid[0] = (unsigned)(((T + fm - 1) / fm) * (r / rs));
	l->grid[1] = l->grid[2] = 1;
	l->block[0] = (unsigned)((fm / 64 + 1) * 128);
	l->block[1] = l->block[2] = 1;
	l->smem = (unsigned)s1tc_smem(c);
	l->pdl = 1;
	/* x (N, n) as (k, block j, token): block j's nb columns, zero past them */
	kt_launch_arg_tmap3(l, B_X, nb, b, T, nb, n, 64, 1, (int)fm);
	/* V (b, r, nb) as (k, rank, block): ranks c0 .. of block j */
	kt_launch_arg_tmap3(l, B_V, nb, r, b, nb, r * nb, 64, (int)rs, 1);
	/* St (r, 16, 16) as (j, i, rank): 8 ranks a copy, rows of 32 bytes */
	kt_launch_arg_tmap3(l, B_ST, 16, 16, r, 16, 256, 16, 16, 8);
	l->args[l->nargs - 1].tmap.swizzle = 32;
	/* w (b, N, r) as (rank, token, block): each consumer warp stores its
	 * 16 tokens x 16 blocks x rank slice (blocks past b clipped) */
	kt_launch_arg_tmap3(l, B_W, r, T, b, r, T * r, (int)rs, 16, 16);
	l->args[l->nargs - 1].tmap.swizzle = (int)rs * 2;
	kt_launch_arg_i32(l, T);
	kt_launch_arg_i32(l, r);
	kt_launch_arg_i32(l, b);
	kt_launch_arg_i32(l, nb);
	/* stage 3, batch i: A = w[i] (b, N, r), B = U_i; y's column block i */
	kt_gemm_launch(&s3, 1, T, mb, r, B_W, r, T * r, B_U, r, mb * r, B_Y, m, mb, b,
		       &out->launch[1]);
	return 0;
}

/*
 * Programs: naive  [gemm s1] [gemm s3 unless the same tile] [blast MIX_B]
 *           tcmix  the same, blast with MIX_TC
 *           fused  [blast FUSED MIX_B + s1's tile] [gemm s3]
 * Prep: S32 = float(S). Launches: stage 1 (+ mixing), stage 3.
 */
static int blast_plan(const struct kt_family *f, const struct kt_shape *s,
		      const struct kt_config *c, const struct kt_target *tgt, struct kt_plan *out,
		      struct kt_err *err)
{
	struct kt_gemm_tile s1, s3;
	struct kt_launch *l;
	char why[200];
	long T = s->v[D_TOKENS], n = s->v[D_IN], m = s->v[D_OUT], b = s->v[D_BLOCKS];
	long r = s->v[D_RANK], nb, mb;
	int fused = is_fused(c->variant), pg3, pm, rc = 0;

	memset(out, 0, sizeof(*out));
	if (blast_check(f, s, c, tgt, why, sizeof(why)))
		return kt_err_set(err, KT_EINVAL, "blast: config cannot run: %s", why);
	if (c->variant == V_FUSED_CL)
		return fcl_plan(s, c, tgt, out, err);
	if (c->variant == V_TCMIX_FUSED)
		return s1tc_plan(s, c, tgt, out, err);
	nb = n / b;
	mb = m / b;
	tiles_of(c, tgt, &s1, &s3);
	if (fused) {
		pm = 0;
		pg3 = 1;
		out->nprograms = 2;
		out->programs[pm].tpl = "blast";
		rc |= kt_gemm_defines(&s1, &out->programs[pm]);
		rc |= kt_program_define(&out->programs[pm], "FUSED", 1);
	} else {
		/* stage 3 shares stage 1's program when their tiles compile the
		 * same (tcmix_ws: one may be persistent, the other not) */
		pg3 = kt_gemm_same_program(&s1, &s3) ? 0 : 1;
		pm = pg3 + 1;
		out->nprograms = pm + 1;
		out->programs[0].tpl = "gemm";
		rc |= kt_gemm_defines(&s1, &out->programs[0]);
		out->programs[pm].tpl = "blast";
	}
	rc |= kt_program_define(&out->programs[pm], "MIX_B", b);
	if (is_tc(c->variant))
		rc |= kt_program_define(&out->programs[pm], "MIX_TC", 1);
	if (s1.pdl)	/* the mixer waits like the GEMM stages around it */
		rc |= kt_program_define(&out->programs[pm], "KT_PDL", 1);
	if (c->variant == V_TCMIX_WS && c->p[P_L2] > 0)	/* blast.cu's MIX_L2 bits */
		rc |= kt_program_define(&out->programs[pm], "MIX_L2", c->p[P_L2] == 2 ? 1 | 8 : 1);
	if (pg3 != 0) {
		out->programs[pg3].tpl = "gemm";
		rc |= kt_gemm_defines(&s3, &out->programs[pg3]);
	}
	if (rc)
		return kt_err_set(err, KT_EINTERNAL, "blast: too many defines");

	out->nprep = 1;
	if (is_tc(c->variant)) {
		st_prep(out, pm, r);
	} else {
		snprintf(out->transform, sizeof(out->transform),
			 "S32[i][j][c] = (float)S[i][j][c]: the mixing weights as fp32, same layout");
		l = kt_launch_elem(&out->prep[0], pm, "blast_s_to_f32", (long long)b * b * r);
		kt_launch_arg_buf(l, B_S);
		kt_launch_arg_buf(l, B_S32);
		kt_launch_arg_i64(l, (long long)b * b * r);
	}

	if (fused) {
		out->nlaunch = 2;
		fused_launch(&s1, pm, T, n, b, r, &out->launch[0]);
	} else {
		out->nlaunch = 3;
		/* stage 1, batch j: A = x + j*nb (rows n apart), B = V_j at
		 * j*r*nb, C = z[j] at j*N*r (rows r apart) */
		kt_gemm_launch(&s1, 0, T, r, nb, B_X, n, nb, B_V, nb, r * nb, B_Z, r, T * r, b,
			       &out->launch[0]);
		if (c->variant == V_TCMIX)
			out->launch[0].pdl = 0;
		if (is_tc(c->variant))
			mix_tc_launch(pm, T, r, tgt, (int)s1.pdl, &out->launch[1]);
		else
			mix_launch(pm, T, b, r, &out->launch[1]);
	}
	/* stage 3, batch i: A = w[i] (b, N, r), B = U_i at i*mb*r; y's column
	 * block i at i*mb, rows m apart */
	kt_gemm_launch(&s3, pg3, T, mb, r, B_W, r, T * r, B_U, r, mb * r, B_Y, m, mb, b,
		       &out->launch[out->nlaunch - 1]);
	return 0;
}

/* Three plain kernels, one thread per output, fp32 accumulation in a fixed
 * order, fp32 intermediates: z32 = x_j V_j^T, w32 = sum_j S_ij . z32[j],
 * y = w32[i] U_i^T. */
static int blast_ref_plan(const struct kt_family *f, const struct kt_shape *s,
			  const struct kt_target *tgt, struct kt_plan *out, struct kt_err *err)
{
	struct kt_launch *l;
	char why[200];
	long T = s->v[D_TOKENS], n = s->v[D_IN], m = s->v[D_OUT], b = s->v[D_BLOCKS];
	long r = s->v[D_RANK];

	memset(out, 0, sizeof(*out));
	if (shape_check(s, why, sizeof(why)))
		return kt_err_set(err, KT_EINVAL, "blast: %s", why);
	out->nprograms = 1;
	out->programs[0].tpl = "blast";
	out->nlaunch = 3;
	kt_ref_block_gemm_launch(&out->launch[0], 0, "blast_ref_z", T, n, b, r, B_X, B_V, B_Z32);
	l = kt_launch_elem(&out->launch[1], 0, "blast_ref_w", (long long)b * T * r);
	kt_launch_arg_buf(l, B_Z32);
	kt_launch_arg_buf(l, B_S);
	kt_launch_arg_buf(l, B_W32);
	kt_launch_arg_i32(l, T);
	kt_launch_arg_i32(l, b);
	kt_launch_arg_i32(l, r);
	l = kt_launch_elem(&out->launch[2], 0, "blast_ref_y", (long long)T * m);
	kt_launch_arg_buf(l, B_W32);
	kt_launch_arg_buf(l, B_U);
	kt_launch_arg_buf(l, B_Y);
	kt_launch_arg_i32(l, T);
	kt_launch_arg_i32(l, m);
	kt_launch_arg_i32(l, b);
	kt_launch_arg_i32(l, r);
	(void)tgt;
	return 0;
}

/* Double accumulation, one token at a time, straight from the block
 * definition: for every block pair (i, j), y_i += (x_j V_j^T) . diag(s_ij)
 * . U_i^T, i.e. z for all blocks (b*r values), then every output as
 * sum_j sum_c U[i][o'][c] S[i][j][c] z[j][c]. Needs only b | in, out (not
 * the GEMM alignment), so tests can use tiny odd shapes. */
static int blast_cpu_ref(const struct kt_family *f, const struct kt_shape *s, const void *const *in,
			 float *const *out, struct kt_err *err)
{
	const uint16_t *x = in[B_X], *U = in[B_U], *V = in[B_V], *S = in[B_S];
	long T = s->v[D_TOKENS], n = s->v[D_IN], m = s->v[D_OUT], b = s->v[D_BLOCKS];
	long r = s->v[D_RANK], mb, t, j, c, o;
	double *z = NULL;
	int rc = -1;

	if (b < 1 || n % b || m % b) {
		kt_err_set(err, KT_EINVAL, "blast: blocks=%ld must divide in and out", b);
		goto out;
	}
	mb = m / b;
	if (!(z = malloc(sizeof(double) * (size_t)(b * r)))) {
		kt_err_set(err, KT_EINTERNAL, "blast: out of memory for the reference");
		goto out;
	}
	for (t = 0; t < T; t++) {
		kt_cpu_block_gemm_row(x, V, t, n, b, r, z);
		for (o = 0; o < m; o++) {
			long i = o / mb, op = o % mb;
			double acc = 0;

			for (j = 0; j < b; j++)
				for (c = 0; c < r; c++)
					acc += (double)kt_bf16_to_f32(U[(i * mb + op) * r + c]) *
					       (double)kt_bf16_to_f32(S[(i * b + j) * r + c]) *
					       z[j * r + c];
			out[0][t * m + o] = (float)acc;
		}
	}
	rc = 0;
out:
	free(z);
	return rc;
}

static double blast_flops(const struct kt_family *f, const struct kt_shape *s)
{
	double b = s->v[D_BLOCKS];

	return 2.0 * s->v[D_TOKENS] * s->v[D_RANK] * (s->v[D_IN] + s->v[D_OUT] + b * b);
}

static double blast_min_bytes(const struct kt_family *f, const struct kt_shape *s)
{
	double T = s->v[D_TOKENS], n = s->v[D_IN], m = s->v[D_OUT], r = s->v[D_RANK];
	double b = s->v[D_BLOCKS];

	return 2.0 * (T * n + r * (n + m + b * b) + T * m);
}

extern const struct kt_family blast_family;

/* tcmix_ws winners of H200 sweeps at the suite's three BLAST shapes (an
 * earlier run than bench/results/h200.json's; docs/families/blast.md), each
 * for the shapes like the one it won: many tokens; out/blocks >= 256; the
 * rest. Taken when check() accepts it, its token tile is full and both
 * GEMM stages fill half the SMs. */
static const struct {
	long min_tokens, min_mb;	/* where it applies */
	long bm, bn, zbn, stages, persist;
} tcmix_ws_defaults[] = {
	{8192, 0, 256, 128, 128, 3, 1},	/* llama7b q/k/v/o N16384 */
	{0, 256, 128, 256, 256, 4, 1},	/* llama7b q/k/v/o N1024 */
	{0, 0, 256, 64, 128, 4, 0},	/* llama1b q/o N1024 */
};

static int blast_default_ws(const struct kt_family *f, const struct kt_shape *s,
			    const struct kt_target *tgt, struct kt_config *out)
{
	long T = s->v[D_TOKENS], b = s->v[D_BLOCKS], mb = s->v[D_OUT] / b, r = s->v[D_RANK];
	long sms = tgt->sms > 0 ? tgt->sms : 100;
	char why[200];
	size_t i;

	for (i = 0; i < sizeof(tcmix_ws_defaults) / sizeof(tcmix_ws_defaults[0]); i++) {
		long bm = tcmix_ws_defaults[i].bm, bn = tcmix_ws_defaults[i].bn;
		long zbn = tcmix_ws_defaults[i].zbn;
		long s1 = ((T + bm - 1) / bm) * ((r + zbn - 1) / zbn) * b;
		long s3 = ((T + bm - 1) / bm) * ((mb + bn - 1) / bn) * b;

		if (T < tcmix_ws_defaults[i].min_tokens || mb < tcmix_ws_defaults[i].min_mb ||
		    T < bm)
			continue;
		memset(out, 0, sizeof(*out));
		out->variant = V_TCMIX_WS;
		out->p[P_BM] = bm;
		out->p[P_BN] = bn;
		out->p[P_ZBN] = zbn;
		out->p[P_STAGES] = tcmix_ws_defaults[i].stages;
		out->p[P_GROUP] = 8;
		out->p[P_CONSUMERS] = 2;
		out->p[P_PERSIST] = tcmix_ws_defaults[i].persist;
		if (2 * s1 >= sms && 2 * s3 >= sms && blast_check(f, s, out, tgt, why,
								  sizeof(why)) == 0)
			return 0;
	}
	return -1;
}

/* On sm_90a tcmix_ws's sweep winners where they fit (above). Else stage
 * 3's tile from the GEMM defaults list, stage 1's N tile the largest that
 * still fits, on mma.sync (runs on every sm_80+ target): tcmix where
 * blocks <= 16 (its tensor-core mixer is several times faster than
 * blast_mix's CUDA cores at the same GEMM stages), else naive. */
static int blast_default(const struct kt_family *f, const struct kt_shape *s,
			 const struct kt_target *tgt, struct kt_config *out)
{
	static const int idx[8] = {P_BM, P_BN, P_BK, P_WM, P_WN, P_STAGES, P_GROUP, P_ZBN};
	char why[200];

	if (shape_check(s, why, sizeof(why)))
		return -1;
	/* sm_90, 64 tokens or fewer, blocks <= 16: tcmix on mma.sync with the
	 * fastest of a random tcmix sample at llama1b q/o N16, its mixer and
	 * stage 3 as programmatic dependents, on a 6-deep ring, which streams
	 * the weights with more bytes in flight than 4 stages at every decode
	 * shape measured (bench/results/blast_decode.json) */
	if (tgt->sm == 90 && s->v[D_TOKENS] <= 64 && s->v[D_BLOCKS] <= 16) {
		struct kt_err e = { 0 };

		if (kt_config_parse(&blast_family,
				    "variant=tcmix,BLOCK_M=16,BLOCK_N=64,Z_BLOCK_N=32,BLOCK_K=64,WARPS_M=1,"
				    "WARPS_N=2,STAGES=6,GROUP_M=8,PDL=1", out, &e) == 0 &&
		    blast_check(f, s, out, tgt, why, sizeof(why)) == 0)
			return 0;
	}
	if (tgt->arch_a && blast_default_ws(f, s, tgt, out) == 0)
		return 0;
	return kt_gemm_default_staged(&blast_family, s, tgt, s->v[D_TOKENS],
				      s->v[D_OUT] / s->v[D_BLOCKS], s->v[D_RANK],
				      s->v[D_BLOCKS] <= 16 ? V_TCMIX : V_NAIVE, idx, out);
}

const struct kt_family blast_family = {
	.name = "blast",
	.summary = "y = x W^T with W a BLAST matrix (U (b, out/b, r), V (b, r, in/b), S (b, b, r); "
		   "block (i, j) = U_i diag(S_ij) V_j), bf16",
	.hidden = 0,
	.ndims = 5,
	.dims = dims,
	.nvariants = V_COUNT,
	.variants = variants,
	.planted = 0,
	.nparams = (int)(sizeof(params) / sizeof(params[0])),
	.params = params,
	.tol = 1e-2,
	.check = blast_check,
	.buffers = blast_buffers,
	.plan = blast_plan,
	.ref_plan = blast_ref_plan,
	.cpu_ref = blast_cpu_ref,
	.fill = NULL,
	.flops = blast_flops,
	.min_bytes = blast_min_bytes,
	.default_config = blast_default,
	.prepare_plan = blast_prepare_plan,
};
