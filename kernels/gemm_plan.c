#include "gemm_plan.h"

#include <stdio.h>
#include <string.h>

int kt_gemm_tile_from(const struct kt_family *f, const struct kt_config *c,
		      struct kt_gemm_tile *t)
{
	t->bm = kt_config_get(f, c, "BLOCK_M");
	t->bn = kt_config_get(f, c, "BLOCK_N");
	t->bk = kt_config_get(f, c, "BLOCK_K");
	t->wm = kt_config_get(f, c, "WARPS_M");
	t->wn = kt_config_get(f, c, "WARPS_N");
	t->stages = kt_config_get(f, c, "STAGES");
	t->group_m = kt_config_get(f, c, "GROUP_M");
	if (t->group_m <= 0)
		t->group_m = 1;
	t->split_k = kt_config_get(f, c, "SPLIT_K");
	if (t->split_k <= 0)
		t->split_k = 1;
	t->wgmma = c->variant >= 0 && c->variant < f->nvariants &&
		   strcmp(f->variants[c->variant], "wgmma") == 0;
	t->ws = 0;
	t->consumers = 0;
	t->epi_direct = 0;
	t->cluster_m = 0;
	t->row_batches = 0;
	t->persistent = 0;
	t->pingpong = 0;	/* the family sets the CTA count (kernels/dense.c) */
	if (c->variant >= 0 && c->variant < f->nvariants) {
		const char *v = f->variants[c->variant];
		size_t n = strlen(v);

		t->ws = n >= 3 && strcmp(v + n - 3, "_ws") == 0;
	}
	if (t->ws) {
		t->consumers = kt_config_get(f, c, "CONSUMERS");
		if (t->consumers <= 0)
			t->consumers = 1;
	}
	if (t->ws || t->wgmma)
		kt_gemm_tile_wg(t);
	if (t->bm <= 0 || t->bn <= 0 || t->bk <= 0 || t->wm <= 0 || t->wn <= 0 || t->stages <= 0)
		return -1;
	return 0;
}

void kt_gemm_tile_set(struct kt_gemm_tile *t, long bm, long bn, long bk, long wm, long wn,
		      long stages, long group_m, int wgmma)
{
	memset(t, 0, sizeof(*t));
	t->bm = bm;
	t->bn = bn;
	t->bk = bk;
	t->wm = wm;
	t->wn = wn;
	t->stages = stages;
	t->group_m = group_m > 0 ? group_m : 1;
	t->split_k = 1;
	if (wgmma) {
		t->wgmma = 1;
		kt_gemm_tile_wg(t);
	}
}

void kt_gemm_tile_wg(struct kt_gemm_tile *t)
{
	t->bk = 64;
	t->wm = t->bm / 16;
	t->wn = 1;
}

static long ws_consumers(const struct kt_gemm_tile *t)
{
	return t->consumers > 0 ? t->consumers : 1;
}

long kt_gemm_walk_ctas(const struct kt_target *tgt)
{
	return tgt && tgt->sms > 0 ? tgt->sms : 1L << 30;
}

unsigned kt_gemm_smem(const struct kt_gemm_tile *t)
{
	if (t->ws) {
		/* 1 KiB to align the ring, the ring (bk = 64: 128 B per row),
		 * 256 B of mbarriers; the staged epilogue (rows of bn bf16 +
		 * 16 B) reuses the ring; a persistent kernel's (whose producer
		 * refills the ring meanwhile) follows it, min(bn, 128) swizzled
		 * columns at a time */
		long ring = t->stages * (t->bm + t->bn) * 128;
		long epi = t->epi_direct ? 0 : t->bm * (t->bn * 2 + 16);

		/* ping-pong: each consumer warpgroup stages its whole tile for
		 * the TMA stores, after the ring */
		if (t->pingpong > 0)
			return (unsigned)(1024 + ring + 2 * t->bm * t->bn * 2 + 256);
		if (t->persistent > 0)
			return (unsigned)(1024 + ring +
					  (t->epi_direct ? 0 : t->bm * (t->bn > 128 ? 128 : t->bn) * 2) +
					  256);
		return (unsigned)(1024 + (ring > epi ? ring : epi) + 256);
	}
	/* wgmma: + 1 KiB to align the ring to the swizzle's 1024-byte groups */
	return (unsigned)(t->stages * (t->bm + t->bn) * t->bk * 2 + (t->wgmma ? 1024 : 0));
}

unsigned kt_gemm_threads(const struct kt_gemm_tile *t)
{
	if (t->ws)	/* the producer warpgroup + the consumers */
		return (unsigned)((ws_consumers(t) + 1) * 128);
	return (unsigned)(t->wm * t->wn * 32);
}

long kt_gemm_acc_regs(const struct kt_gemm_tile *t)
{
	if (t->ws && t->pingpong > 0)	/* each consumer owns a whole tile */
		return t->bm * t->bn / 128;
	if (t->ws)	/* per consumer thread; the producer holds none */
		return t->bm * t->bn / (ws_consumers(t) * 128);
	return t->bm * t->bn / (long)kt_gemm_threads(t);
}

long kt_gemm_reg_estimate(const struct kt_gemm_tile *t)
{
	long nt = kt_gemm_threads(t);
	long mi = t->bm / t->wm / 16, ni = t->bn / t->wn / 8;
	long chunks = (t->bm + t->bn) * (t->bk / 8);
	long loads = (chunks + nt - 1) / nt;

	if (t->ws)	/* consumers: accumulators, descriptors, loop state */
		return kt_gemm_acc_regs(t) + 40;
	if (t->wgmma)	/* operands come from shared memory: no fragments */
		return kt_gemm_acc_regs(t) + 3 * loads + 40;
	/* accumulators + two fragment sets + a pointer, offset and predicate
	 * per 16-byte copy + indices and loop state */
	return kt_gemm_acc_regs(t) + 2 * (mi * 4 + ni * 2) + 3 * loads + 24;
}

#define WHY(...) (snprintf(why, whylen, __VA_ARGS__), 1)

/* Split-K pays only where the tiles leave SMs idle, and only while each
 * slice keeps a few k-tiles to pipeline (both GEMM paths). */
static int splitk_check(const struct kt_gemm_tile *t, long M, long N, long K,
			const struct kt_target *tgt, char *why, size_t whylen)
{
	long tiles = ((M + t->bm - 1) / t->bm) * ((N + t->bn - 1) / t->bn);
	long sms = tgt->sms > 0 ? tgt->sms : 132;

	if (t->split_k <= 1)
		return 0;
	if (2 * tiles > sms)
		return WHY("SPLIT_K=%ld: %ld tiles already fill half of %ld SMs", t->split_k, tiles,
			   sms);
	if (tiles * t->split_k > 2 * sms)
		return WHY("SPLIT_K=%ld: %ld CTAs, over two waves", t->split_k, tiles * t->split_k);
	if (K / t->split_k < 4 * t->bk)
		return WHY("SPLIT_K=%ld: K=%ld leaves under 4 k-tiles per slice", t->split_k, K);
	return 0;
}

/* The warp-specialized kernel's rules (templates/gemm.cu, gemm_tn_ws_body):
 * what its static_asserts, the target and the copy engine accept. */
static int ws_check(const struct kt_gemm_tile *t, long M, long N, long K, unsigned extra_smem,
		    const struct kt_target *tgt, char *why, size_t whylen)
{
	long cons = ws_consumers(t);
	unsigned long smem = (unsigned long)kt_gemm_smem(t) + extra_smem;

	if (tgt->sm != 90 || !tgt->arch_a)
		return WHY("wgmma_ws (wgmma, setmaxnreg) needs sm_90a, target is sm_%d%s", tgt->sm,
			   tgt->arch_a ? "a" : "");
	if (cons != 1 && cons != 2)
		return WHY("CONSUMERS=%ld must be 1 or 2", cons);
	if (t->pingpong <= 0 && (t->bm % (64 * cons) || t->bm > 256))
		return WHY("BLOCK_M=%ld must be 64, 128 or 256 and give each of %ld consumer "
			   "warpgroups whole 64-row tiles", t->bm, cons);
	if (t->bn != 64 && t->bn != 128 && t->bn != 256)
		return WHY("wgmma_ws: BLOCK_N=%ld must be 64, 128 or 256", t->bn);
	if (t->cluster_m > 2)
		return WHY("CLUSTER_M=%ld: clusters of 1 or 2 CTAs", t->cluster_m);
	if (t->stages < 2)
		return WHY("STAGES=%ld: the ring needs at least 2", t->stages);
	if (t->split_k > 1 && t->cluster_m > 1)
		return WHY("SPLIT_K=%ld with CLUSTER_M=%ld: split-K runs without clusters",
			   t->split_k, t->cluster_m);
	if (t->split_cluster && (t->split_k != 2 || t->cluster_m > 1 || t->persistent > 0 ||
				 t->epi_direct))
		return WHY("the split-K cluster reduce pairs SPLIT_K=2 slices, the staged "
			   "epilogue, no CLUSTER_M or PERSISTENT (SPLIT_K=%ld, CLUSTER_M=%ld, "
			   "PERSISTENT=%ld, EPILOGUE=%d)", t->split_k, t->cluster_m, t->persistent,
			   t->epi_direct ? 0 : 1);
	if (t->persistent > 0 && (t->split_k > 1 || t->cluster_m > 1))
		return WHY("PERSISTENT (%ld CTAs) with SPLIT_K=%ld, CLUSTER_M=%ld: the persistent "
			   "walk covers whole tiles of single CTAs", t->persistent, t->split_k,
			   t->cluster_m);
	if (t->pingpong > 0 && (t->split_k > 1 || t->cluster_m > 1 || t->persistent > 0 ||
				t->split_cluster))
		return WHY("PINGPONG with SPLIT_K=%ld, CLUSTER_M=%ld, PERSISTENT=%ld: the ping-pong "
			   "kernel is its own persistent walk of whole tiles of single CTAs",
			   t->split_k, t->cluster_m, t->persistent);
	if (t->pingpong > 0 && cons != 2)
		return WHY("PINGPONG with CONSUMERS=%ld: the ping-pong kernel's two consumer "
			   "warpgroups take turns, CONSUMERS must be 2", cons);
	if (t->pingpong > 0 && t->bm != 64 && t->bm != 128)
		return WHY("PINGPONG with BLOCK_M=%ld: each consumer warpgroup owns a whole tile "
			   "of 64 or 128 rows (1 or 2 m64 wgmma tiles)", t->bm);
	if (t->pingpong > 0 && (t->epi_direct || t->col_group > 0))
		return WHY("PINGPONG: C leaves only through the staged TMA stores of whole "
			   "tiles (no direct epilogue, no column groups)");
	if ((long)kt_gemm_threads(t) > tgt->max_threads)
		return WHY("%u threads > %d per block", kt_gemm_threads(t), tgt->max_threads);
	if (smem > (unsigned long)tgt->smem_optin)
		return WHY("shared memory %lu B > %d B opt-in limit", smem, tgt->smem_optin);
	/* the consumers get 232 registers (setmaxnreg); the kernel asserts
	 * at most 128 fp32 accumulators each */
	if (kt_gemm_acc_regs(t) > 128)
		return WHY("%ld accumulators per consumer thread > 128 (register spills)",
			   kt_gemm_acc_regs(t));
	/* TMA: 16-byte global strides (row strides of K elements), the
	 * 16-byte stores of the staged epilogue (N) */
	if (N % 8 || K % 8)
		return WHY("N=%ld and K=%ld must be multiples of 8 (16-byte TMA strides and stores)",
			   N, K);
	if (M < 1 || N < 1 || K < 1)
		return WHY("empty GEMM %ldx%ldx%ld", M, N, K);
	if (t->bm / 2 >= M)
		return WHY("BLOCK_M=%ld is over twice M=%ld", t->bm, M);
	if (t->bn / 2 >= N)
		return WHY("BLOCK_N=%ld is over twice N=%ld", t->bn, N);
	return splitk_check(t, M, N, K, tgt, why, whylen);
}

int kt_gemm_check(const struct kt_gemm_tile *t, long M, long N, long K, unsigned extra_smem,
		  const struct kt_target *tgt, char *why, size_t whylen)
{
	long threads = (long)kt_gemm_threads(t);
	unsigned long smem = (unsigned long)kt_gemm_smem(t) + extra_smem;
	long regs;

	if (tgt->sm < 80)
		return WHY("cp.async and bf16 mma.sync need sm_80+, target is sm_%d", tgt->sm);
	if (t->col_group > 0 && ((t->ws && t->epi_direct) || t->split_k > 1 || t->col_group % 8))
		return WHY("column groups (%ld): no split-K, the ws kernel's staged epilogue, "
			   "groups of a multiple of 8", t->col_group);
	if (t->col_step > 1 && (t->ws || t->split_k > 1 || t->col_group > 0))
		return WHY("a column step (%ld): gemm_tn only, no split-K, no column groups",
			   t->col_step);
	if (t->ws)
		return ws_check(t, M, N, K, extra_smem, tgt, why, whylen);
	if (t->persistent > 0)
		return WHY("PERSISTENT (%ld CTAs): only the warp-specialized kernel (ws) has a "
			   "persistent form", t->persistent);
	if (t->pingpong > 0)
		return WHY("PINGPONG: the ping-pong kernel is a form of the warp-specialized "
			   "one (ws, sm_90a)");
	if (t->pdl && (tgt->sm < 90 || t->wgmma))
		return WHY("programmatic dependent launch on gemm_tn: the mma.sync path, sm_90+ "
			   "(griddepcontrol), target sm_%d", tgt->sm);
	if (t->wgmma) {
		if (tgt->sm != 90 || !tgt->arch_a)
			return WHY("wgmma needs sm_90a, target is sm_%d%s", tgt->sm,
				   tgt->arch_a ? "a" : "");
		if (t->bm % 64 || t->bm > 256)
			return WHY("wgmma: BLOCK_M=%ld must be 64, 128 or 256 (warpgroups of 64 rows)",
				   t->bm);
		if (t->bn != 64 && t->bn != 128 && t->bn != 256)
			return WHY("wgmma: BLOCK_N=%ld must be 64, 128 or 256", t->bn);
		if (t->stages < 3)
			return WHY("wgmma: STAGES=%ld, the pipeline needs at least 3", t->stages);
	}
	if (t->bk != 32 && t->bk != 64)
		return WHY("BLOCK_K=%ld: the swizzled layout supports 32 or 64", t->bk);
	if (t->bm % (t->wm * 16) || t->bn % (t->wn * 16))
		return WHY("warp tile %ldx%ld is not a multiple of 16x16",
			   t->bm / t->wm, t->bn / t->wn);
	if (t->stages < 2)
		return WHY("STAGES=%ld: the pipeline needs at least 2", t->stages);
	if (threads > tgt->max_threads)
		return WHY("%ld threads > %d per block", threads, tgt->max_threads);
	if (smem > (unsigned long)tgt->smem_optin)
		return WHY("shared memory %lu B > %d B opt-in limit", smem, tgt->smem_optin);
	/* More than 128 fp32 accumulators per thread leave no room for
	 * fragments and addresses under the 255-register cap: ptxas spills. */
	if (kt_gemm_acc_regs(t) > 128)
		return WHY("%ld accumulators per thread > 128 (register spills)",
			   kt_gemm_acc_regs(t));
	regs = kt_gemm_reg_estimate(t);
	if (regs > 255 || regs * threads > 65536)
		return WHY("estimated %ld registers per thread x %ld threads exceed the register file",
			   regs, threads);
	if (splitk_check(t, M, N, K, tgt, why, whylen))
		return 1;
	if (N % 8 || K % 8)
		return WHY("N=%ld and K=%ld must be multiples of 8 (16-byte copies)", N, K);
	if (M < 1 || N < 1 || K < 1)
		return WHY("empty GEMM %ldx%ldx%ld", M, N, K);
	/* A tile with more than half of its rows (columns) always empty is
	 * dominated by the next smaller tile (16 rows, 32 columns: the
	 * smallest in the spaces, kept for tiny problems). */
	if (t->bm > 16 && t->bm / 2 >= M)
		return WHY("BLOCK_M=%ld is over twice M=%ld", t->bm, M);
	if (t->bn > 32 && t->bn / 2 >= N)
		return WHY("BLOCK_N=%ld is over twice N=%ld", t->bn, N);
	return 0;
}

/* Rings deeper than 5 are for the decode tiles, whose few token rows
 * leave each CTA streaming weights with little else to hide the latency
 * behind (dense, lowrank, blast, monarch at 16 tokens: STAGES 6-8 3-20%
 * faster than 4-5; the stages_ab entries of bench/results'
 * lowrank_decode.json, blast_decode.json, monarch_decode.json, and
 * dense_decode.json). At larger tiles the ring was never what bound (the
 * ws winners take 3-4), and deep rings there would multiply every
 * exhaustive sweep. A rule of the families' spaces, not of the kernel:
 * kt_gemm_check runs such tiles. */
int kt_gemm_check_space(const struct kt_gemm_tile *t, long M, long N, long K,
			unsigned extra_smem, const struct kt_target *tgt, char *why, size_t whylen)
{
	if (t->stages > 5 && t->bm > 32)
		return WHY("STAGES=%ld: rings deeper than 5 are for decode tiles (BLOCK_M <= 32), "
			   "BLOCK_M is %ld", t->stages, t->bm);
	return kt_gemm_check(t, M, N, K, extra_smem, tgt, why, whylen);
}

int kt_program_define(struct kt_program *p, const char *name, long value)
{
	if (p->ndefines >= KT_MAX_DEFINES)
		return -1;
	snprintf(p->defines[p->ndefines++], sizeof(p->defines[0]), "%s=%ld", name, value);
	return 0;
}

/* the column groups (gemm.cu's COLGRP) and step (COLSTEP), on any path
 * that takes them */
static int col_defines(const struct kt_gemm_tile *t, struct kt_program *p)
{
	if (t->col_step > 1)
		return kt_program_define(p, "COLSTEP", t->col_step);
	if (t->col_group <= 0)
		return 0;
	return kt_program_define(p, "COLGRP", t->col_group) |
	       kt_program_define(p, "COLGSTRIDE", t->col_gstride);
}

int kt_gemm_defines(const struct kt_gemm_tile *t, struct kt_program *p)
{
	int rc = 0;

	rc |= kt_program_define(p, "BLOCK_M", t->bm);
	rc |= kt_program_define(p, "BLOCK_N", t->bn);
	rc |= kt_program_define(p, "BLOCK_K", t->bk);
	rc |= kt_program_define(p, "WARPS_M", t->wm);
	rc |= kt_program_define(p, "WARPS_N", t->wn);
	rc |= kt_program_define(p, "STAGES", t->stages);
	rc |= kt_program_define(p, "GROUP_M", t->group_m);
	if (t->ws) {
		rc |= kt_program_define(p, "WS", 1);
		rc |= kt_program_define(p, "CONSUMERS", ws_consumers(t));
		rc |= kt_program_define(p, "EPILOGUE", t->epi_direct ? 0 : 1);
		if (t->cluster_m > 1)
			rc |= kt_program_define(p, "CLUSTER_M", t->cluster_m);
		if (t->split_k > 1)
			rc |= kt_program_define(p, "SPLIT_K", t->split_k);
		if (t->split_cluster)
			rc |= kt_program_define(p, "SPLIT_CLUSTER", 1);
		if (t->persistent > 0)
			rc |= kt_program_define(p, "PERSISTENT", 1);
		if (t->pingpong > 0)
			rc |= kt_program_define(p, "PINGPONG", 1);
		if (t->pdl)
			rc |= kt_program_define(p, "KT_PDL", 1);
		if (t->l2)
			rc |= kt_program_define(p, "L2_HINT", t->l2);
		return rc | col_defines(t, p);
	}
	if (t->wgmma)
		rc |= kt_program_define(p, "WGMMA", 1);
	if (t->split_k > 1)
		rc |= kt_program_define(p, "SPLIT_K", t->split_k);
	if (t->pdl)	/* gemm_tn: B's first stages before the wait */
		rc |= kt_program_define(p, "KT_PDL", 1) | kt_program_define(p, "PDL_PREFETCH", 1);
	return rc | col_defines(t, p);
}

int kt_gemm_same_program(const struct kt_gemm_tile *a, const struct kt_gemm_tile *b)
{
	struct kt_program pa, pb;
	int i;

	memset(&pa, 0, sizeof(pa));
	memset(&pb, 0, sizeof(pb));
	if (kt_gemm_defines(a, &pa) || kt_gemm_defines(b, &pb) || pa.ndefines != pb.ndefines)
		return 0;
	for (i = 0; i < pa.ndefines; i++)
		if (strcmp(pa.defines[i], pb.defines[i]) != 0)
			return 0;
	return 1;
}

static void add_arg(struct kt_launch *l, enum kt_arg_kind kind, int buf, long long v)
{
	struct kt_arg *a;

	if (l->nargs >= KT_MAX_ARGS)
		return;	/* callers stay far below KT_MAX_ARGS */
	a = &l->args[l->nargs++];
	memset(a, 0, sizeof(*a));
	a->kind = kind;
	a->buf = buf;
	a->i = v;
}

void kt_launch_arg_buf(struct kt_launch *l, int buf)
{
	add_arg(l, KT_ARG_BUF, buf, 0);
}

void kt_launch_arg_i32(struct kt_launch *l, long long v)
{
	add_arg(l, KT_ARG_I32, 0, v);
}

void kt_launch_arg_i64(struct kt_launch *l, long long v)
{
	add_arg(l, KT_ARG_I64, 0, v);
}

struct kt_launch *kt_launch_elem(struct kt_launch *l, int program, const char *kernel,
				 long long total)
{
	long long grid = (total + KT_ELEM_THREADS - 1) / KT_ELEM_THREADS;

	memset(l, 0, sizeof(*l));
	l->program = program;
	snprintf(l->kernel, sizeof(l->kernel), "%s", kernel);
	l->grid[0] = (unsigned)(grid < 1 ? 1 : grid > KT_ELEM_MAX_GRID ? KT_ELEM_MAX_GRID : grid);
	l->grid[1] = l->grid[2] = 1;
	l->block[0] = KT_ELEM_THREADS;
	l->block[1] = l->block[2] = 1;
	return l;
}

void kt_launch_arg_tmap3(struct kt_launch *l, int buf, long long d0, long long d1, long long d2,
			 long long s1, long long s2, int b0, int b1, int b2)
{
	struct kt_arg *a;

	if (l->nargs >= KT_MAX_ARGS)
		return;	/* as add_arg */
	add_arg(l, KT_ARG_TMAP, buf, 0);
	a = &l->args[l->nargs - 1];
	a->tmap.rank = 3;
	a->tmap.dims[0] = d0;
	a->tmap.dims[1] = d1;
	a->tmap.dims[2] = d2;
	a->tmap.strides[0] = 1;
	a->tmap.strides[1] = s1;
	a->tmap.strides[2] = s2;
	a->tmap.box[0] = b0;
	a->tmap.box[1] = b1;
	a->tmap.box[2] = b2;
	a->tmap.swizzle = 128;
}

/* A rank-3 map (k, rows, batch) over buf: box (64, box_rows, 1), 128-byte
 * swizzle. Returns the kernel's zA / zB: the batch coordinate's multiplier,
 * 0 when every batch reads the same matrix (batch stride 0); or 2 for the
 * map (k, batch, rows), box (64, 1, box_rows), taken (row_batches) when
 * the batches sit side by side within each row (K <= stride, batch * stride
 * <= ld: monarch's x blocks), where (k, rows, batch) would have a batch
 * stride below the row stride. */
static int ws_map_arg(struct kt_launch *l, int buf, long rows, long K, long ld, long stride,
		      long batch, long box_rows, int row_batches)
{
	int shared = batch > 1 && stride == 0;
	long nb = batch > 1 && !shared ? batch : 1;

	if (row_batches && batch > 1 && stride >= K && stride < ld && batch * stride <= ld) {
		kt_launch_arg_tmap3(l, buf, K, batch, rows, stride, ld, 64, 1, (int)box_rows);
		return 2;
	}
	/* one batch: any stride past the matrix (the driver wants 16 bytes
	 * multiples, the worker every address inside the buffer) */
	kt_launch_arg_tmap3(l, buf, K, rows, nb, ld, nb > 1 ? stride : rows * ld, 64,
			    (int)box_rows, 1);
	return shared ? 0 : 1;
}

static void ws_launch(const struct kt_gemm_tile *t, int program, long M, long N, long K,
		      int bufA, long lda, long sA, int bufB, long ldb, long sB, int bufC, long ldc,
		      long sC, long batch, struct kt_launch *out)
{
	long cm = t->cluster_m > 1 ? t->cluster_m : 1;
	long tm = (M + cm * t->bm - 1) / (cm * t->bm), tn = (N + t->bn - 1) / t->bn;
	int zA, zB;

	memset(out, 0, sizeof(*out));
	out->program = program;
	snprintf(out->kernel, sizeof(out->kernel), "gemm_tn_ws");
	out->pdl = t->pdl ? 1 : 0;
	out->grid[0] = (unsigned)(cm * tm * tn);
	out->grid[1] = 1;	/* split-K: kt_gemm_launches sets SPLIT_K slices */
	out->grid[2] = (unsigned)batch;
	if (t->persistent > 0 || t->pingpong > 0) {
		/* a fixed set of CTAs walks the tm * tn * batch work items;
		 * more CTAs than items would only start and leave */
		long items = tm * tn * batch, p = t->pingpong > 0 ? t->pingpong : t->persistent;

		out->grid[0] = (unsigned)(p < items ? p : items);
		out->grid[2] = 1;
	}
	out->block[0] = kt_gemm_threads(t);
	out->block[1] = out->block[2] = 1;
	out->smem = kt_gemm_smem(t);
	zA = ws_map_arg(out, bufA, M, K, lda, sA, batch, t->bm, t->row_batches > 0);
	zB = ws_map_arg(out, bufB, N, K, ldb, sB, batch, t->bn / cm, t->row_batches > 0);
	if (t->pingpong > 0) {
		/* C through a map (N, M, batch) the TMA stores write: box one
		 * 128-byte panel of a consumer's tile, the copy engine clips
		 * at M and N */
		kt_launch_arg_tmap3(out, bufC, N, M, batch > 1 ? batch : 1, ldc,
				    batch > 1 ? sC : M * ldc, 64, (int)t->bm, 1);
		kt_launch_arg_i32(out, M);
		kt_launch_arg_i32(out, N);
		kt_launch_arg_i32(out, K);
		kt_launch_arg_i32(out, zA);
		kt_launch_arg_i32(out, zB);
		kt_launch_arg_i32(out, batch);
		return;
	}
	kt_launch_arg_buf(out, bufC);
	kt_launch_arg_i32(out, M);
	kt_launch_arg_i32(out, N);
	kt_launch_arg_i32(out, K);
	kt_launch_arg_i64(out, ldc);
	kt_launch_arg_i64(out, sC);
	kt_launch_arg_i32(out, zA);
	kt_launch_arg_i32(out, zB);
	if (t->persistent > 0)	/* the kernel's walk: gridDim.z is 1 */
		kt_launch_arg_i32(out, batch);
}

void kt_gemm_launch(const struct kt_gemm_tile *t, int program, long M, long N, long K,
		    int bufA, long lda, long sA, int bufB, long ldb, long sB,
		    int bufC, long ldc, long sC, long batch, struct kt_launch *out)
{
	long tm = (M + t->bm - 1) / t->bm, tn = (N + t->bn - 1) / t->bn;

	if (t->ws) {
		ws_launch(t, program, M, N, K, bufA, lda, sA, bufB, ldb, sB, bufC, ldc, sC, batch,
			  out);
		return;
	}
	memset(out, 0, sizeof(*out));
	out->program = program;
	snprintf(out->kernel, sizeof(out->kernel), "gemm_tn");
	out->pdl = t->pdl ? 1 : 0;
	out->grid[0] = (unsigned)(tm * tn);
	out->grid[1] = 1;
	out->grid[2] = (unsigned)batch;
	out->block[0] = kt_gemm_threads(t);
	out->block[1] = out->block[2] = 1;
	out->smem = kt_gemm_smem(t);
	kt_launch_arg_buf(out, bufA);
	kt_launch_arg_buf(out, bufB);
	kt_launch_arg_buf(out, bufC);
	kt_launch_arg_i32(out, M);
	kt_launch_arg_i32(out, N);
	kt_launch_arg_i32(out, K);
	kt_launch_arg_i64(out, lda);
	kt_launch_arg_i64(out, ldb);
	kt_launch_arg_i64(out, ldc);
	kt_launch_arg_i64(out, sA);
	kt_launch_arg_i64(out, sB);
	kt_launch_arg_i64(out, sC);
}

size_t kt_gemm_workspace(const struct kt_gemm_tile *t, long M, long N)
{
	return t->split_k > 1 && !t->split_cluster ? (size_t)t->split_k * (size_t)M * (size_t)N
						   : 0;
}

int kt_gemm_launches(const struct kt_gemm_tile *t, int program, long M, long N, long K,
		     int bufA, long lda, int bufB, long ldb, int bufC, long ldc, int bufW,
		     struct kt_launch out[2])
{
	struct kt_launch *r = &out[1];

	if (t->split_k <= 1) {
		kt_gemm_launch(t, program, M, N, K, bufA, lda, 0, bufB, ldb, 0, bufC, ldc, 0, 1,
			       &out[0]);
		return 1;
	}
	if (t->split_cluster) {
		/* the slices reduce in their cluster and store C */
		kt_gemm_launch(t, program, M, N, K, bufA, lda, 0, bufB, ldb, 0, bufC, ldc, 0, 1,
			       &out[0]);
		out[0].grid[1] = (unsigned)t->split_k;
		return 1;
	}
	/* the workspace slices are M x N, row stride N */
	kt_gemm_launch(t, program, M, N, K, bufA, lda, 0, bufB, ldb, 0, bufW, N, 0, 1, &out[0]);
	out[0].grid[1] = (unsigned)t->split_k;
	memset(r, 0, sizeof(*r));
	r->program = program;
	snprintf(r->kernel, sizeof(r->kernel), "splitk_reduce");
	r->pdl = t->pdl ? 1 : 0;	/* the same program: it waits when the GEMM does */
	r->grid[0] = (unsigned)(((size_t)M * (size_t)N / 4 + 255) / 256);
	r->grid[1] = r->grid[2] = 1;
	r->block[0] = 256;
	r->block[1] = r->block[2] = 1;
	kt_launch_arg_buf(r, bufW);
	kt_launch_arg_buf(r, bufC);
	kt_launch_arg_i32(r, M);
	kt_launch_arg_i32(r, N);
	kt_launch_arg_i64(r, ldc);
	kt_launch_arg_i32(r, t->split_k);
	return 2;
}

void kt_ref_gemm_launch(int program, long M, long N, long K, int bufA, int a_f32, int bufB,
			int bufC, int c_f32, struct kt_launch *l)
{
	memset(l, 0, sizeof(*l));
	l->program = program;
	snprintf(l->kernel, sizeof(l->kernel), "ref_gemm_tn");
	l->block[0] = 32;
	l->block[1] = 8;
	l->block[2] = 1;
	l->grid[0] = (unsigned)((N + 31) / 32);
	l->grid[1] = (unsigned)((M + 7) / 8);
	l->grid[2] = 1;
	kt_launch_arg_buf(l, bufA);
	kt_launch_arg_i32(l, a_f32);
	kt_launch_arg_buf(l, bufB);
	kt_launch_arg_buf(l, bufC);
	kt_launch_arg_i32(l, c_f32);
	kt_launch_arg_i32(l, M);
	kt_launch_arg_i32(l, N);
	kt_launch_arg_i32(l, K);
}

void kt_ref_block_gemm_launch(struct kt_launch *l, int program, const char *kernel, long N,
			      long n, long b, long r, int bufX, int bufW, int bufZ32)
{
	kt_launch_elem(l, program, kernel, (long long)b * N * r);
	kt_launch_arg_buf(l, bufX);
	kt_launch_arg_buf(l, bufW);
	kt_launch_arg_buf(l, bufZ32);
	kt_launch_arg_i32(l, N);
	kt_launch_arg_i32(l, n);
	kt_launch_arg_i32(l, b);
	kt_launch_arg_i32(l, r);
}

void kt_cpu_block_gemm_row(const uint16_t *x, const uint16_t *w, long t, long n, long b, long r,
			   double *z)
{
	long nb = n / b, j, c, k;

	for (j = 0; j < b; j++)
		for (c = 0; c < r; c++) {
			double acc = 0;

			for (k = 0; k < nb; k++)
				acc += (double)kt_bf16_to_f32(x[t * n + j * nb + k]) *
				       (double)kt_bf16_to_f32(w[(j * r + c) * nb + k]);
			z[j * r + c] = acc;
		}
}

/* Robust configs, best first: the first that check() accepts wins. */
static const long defaults[][7] = {
	/* BLOCK_M, BLOCK_N, BLOCK_K, WARPS_M, WARPS_N, STAGES, GROUP_M */
	{128, 256, 32, 2, 4, 4, 8},
	{128, 128, 32, 2, 2, 4, 8},
	{64, 128, 32, 2, 2, 4, 8},
	{32, 128, 64, 1, 4, 4, 1},
	{16, 32, 64, 1, 2, 5, 1},	/* the decode tile (docs/families/dense.md) */
	{16, 64, 64, 1, 4, 4, 1},
	{16, 32, 32, 1, 2, 2, 1},
};

int kt_gemm_default(long M, long N, long K, const struct kt_target *tgt, long p[7])
{
	size_t i;
	int sms = tgt->sms > 0 ? tgt->sms : 100;
	char why[160];

	for (i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++) {
		struct kt_gemm_tile t;
		long ctas;
		int j;

		memset(&t, 0, sizeof(t));
		t.bm = defaults[i][0];
		t.bn = defaults[i][1];
		t.bk = defaults[i][2];
		t.wm = defaults[i][3];
		t.wn = defaults[i][4];
		t.stages = defaults[i][5];
		t.group_m = defaults[i][6];
		t.split_k = 1;
		ctas = ((M + t.bm - 1) / t.bm) * ((N + t.bn - 1) / t.bn);

		if (kt_gemm_check(&t, M, N, K, 0, tgt, why, sizeof(why)))
			continue;
		if (ctas < sms / 2 && i + 1 < sizeof(defaults) / sizeof(defaults[0]))
			continue;
		for (j = 0; j < 7; j++)
			p[j] = defaults[i][j];
		return 0;
	}
	return -1;
}


int kt_gemm_default_staged(const struct kt_family *f, const struct kt_shape *s,
			   const struct kt_target *tgt, long M, long N, long K, int variant,
			   const int idx[8], struct kt_config *out)
{
	static const long zbn[] = {256, 128, 64, 32};
	static const long fallback[][7] = {
		/* BLOCK_M, BLOCK_N, BLOCK_K, WARPS_M, WARPS_N, STAGES, GROUP_M */
		{64, 64, 32, 2, 2, 3, 8},
		{16, 32, 32, 1, 2, 2, 8},
	};
	long p[7];
	char why[200];
	size_t i, f_;
	int k;

	for (f_ = 0; f_ <= sizeof(fallback) / sizeof(fallback[0]); f_++) {
		if (f_ == 0) {
			if (kt_gemm_default(M, N, K, tgt, p))
				continue;
		} else {
			memcpy(p, fallback[f_ - 1], sizeof(p));
		}
		for (i = 0; i < sizeof(zbn) / sizeof(zbn[0]); i++) {
			memset(out, 0, sizeof(*out));
			out->variant = variant;
			for (k = 0; k < 6; k++)
				out->p[idx[k]] = p[k];
			out->p[idx[6]] = 8;
			out->p[idx[7]] = zbn[i];
			/* the GEMM list's tiles are dense's: keep each value
			 * to one the family lists (its STAGES may stop
			 * below), so that the default is a point of the space
			 * that `ktune sweep --config` can verify */
			for (k = 0; k < 8; k++)
				out->p[idx[k]] = (f->params[idx[k]].variants >> variant) & 1u
							 ? kt_param_clamp(f, idx[k], out->p[idx[k]])
							 : 0;
			if (f->check(f, s, out, tgt, why, sizeof(why)) == 0)
				return 0;
		}
	}
	return -1;
}
