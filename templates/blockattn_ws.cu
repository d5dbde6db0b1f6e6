/*
 * blockattn_ws.cu -- jagged block-diagonal attention, forward (BWD 0) and
 * backward (BWD 1), warp-specialized on wgmma (sm_90a). Same problem, work
 * items, arguments and outputs as blockattn_fwd.cu / blockattn_bwd.cu, whose
 * helpers (softmax, the epilogue with its conjugate rotation) it includes.
 *
 *   blockattn_fwd_ws(q, k, v, blocks, table, o, nitems, H, cta_step, item_step, nper)
 *   blockattn_bwd_ws(q, k, v, do, blocks, table, dq, dk, dv, nitems, H, ...)
 *       block (CONS + 1) * 128, dynamic smem STAGES * (3 | 4) * BLK * HD * 2 + 1024,
 *       the backward at BLK 128 CONS * 32 KiB more at HD 64, 64 KiB at
 *       HD 128 (STAGES 1: one slot the consumers share), and without
 *       rope 32 KiB more there (q's second buffer: 225 KiB); the
 *       forward at BLK 256 (2 * 64 CONS + STAGES * 2 KC) * HD * 2 + 1024
 *       (two slots of a round's q rows, STAGES of a k and a v chunk; KC
 *       keys a chunk, 128 at HD 64, 64 at HD 128).
 *       With BOUND, nitems is a bound and the prep's count decides, as in
 *       blockattn_fwd.cu.
 *   blockattn_bwd_dq, blockattn_bwd_dkv(q, k, v, do, blocks, table, dq, dk, dv,
 *                                       nitems, H, stats_at)
 *       the backward at BLK 256: the chunked variant's two
 *       launches and arguments on wgmma, in persistent CTAs (any grid up
 *       to one CTA a unit; "The backward at BLK 256" below).
 *
 * BLK 64 or 128, and the forward at 256: a slot of its q, k, v is 192 KiB
 * at HD 128 and a row tile's S 128 fp32 a thread, so that forward streams
 * the item in steps instead (rounds of query rows, chunks of keys, an
 * online softmax; see "The forward at BLK 256" below); everything that
 * follows here is BLK 64 and 128. A consumer warpgroup's wgmma tile is
 * m64, so a 128-token item is two m64 row halves (S of a half: 64 x 128
 * keys, 64 fp32 a thread).
 * Forward at BLK 128: the CONS consumers share each item, consumer c taking
 * halves c, c + CONS (CONS 2: one half each, over the same slot; CONS 1: both,
 * one after the other), and a slot is empty once all CONS have arrived. Why
 * share rather than give each consumer its own items: at HD 128 a slot is
 * 96 KiB and only two fit, so a consumer per item would hold both and leave
 * the producer nothing to fill; shared, one slot is read while the other
 * loads, and a thread still holds one half (S plus O) at a time. Halves whose
 * rows all lie past the block's length are skipped.
 *
 * Warpgroup 0 produces: its 128 threads copy each item's q, k, v (do) by
 * cp.async into a ring of STAGES slots and, with ROPE, each rotates the
 * chunks it copied once they land (RPROD: see producer()), so no rotation
 * sits on an MMA warp's path. Consumer c of CONS runs items c, c + CONS, ...
 * Slot s = i % STAGES has a full barrier (128 producer arrivals) and an
 * empty one (128 arrivals of the item's consumer); STAGES >= CONS keeps
 * every wait within one phase. Tiles are 64-column panels of 128-byte rows,
 * 128-byte swizzle: K-major for S = q k^T and dP = do v^T (+32 B per k16,
 * + one panel per 64 columns), MN-major where a product reads a tile along
 * its rows (k16 = 2048 B; LBO one panel, SBO 1024 B).
 * Consumer, per item (one m64 tile; warp w owns rows 16w .. 16w+15 in the
 * mma.sync kernels' accumulator layout):
 *   fwd: S = q k^T, exact softmax in registers (no running max, no LSE),
 *     O = P v (P the register A operand, v MN-major) / row sum, stored.
 *   bwd: S and dP = do v^T; P, Di = rowsum(P dP), dS in registers; P to the
 *     dead v tile; dQ = dS k, conjugate-rotated with ROPE, stored; dS to the
 *     dead k tile; dV = P^T do and dK = dS^T q (both operands MN-major).
 *   bwd at BLK 128: each consumer its own items; the two m64 halves one
 *     after the other, as above, half 0's P and dS into the consumer's
 *     scratch (after the ring and the barriers), half 1's into v and k;
 *     then dV and dK as two m64 key tiles each over both halves. At HD
 *     128 one slot, every item shared: consumer c takes query halves c,
 *     c + CONS (S, dP, dS, dQ), all P and dS go to one scratch, then key
 *     tiles c, c + CONS (dV, dK over all 128 query rows).
 * Rows past a block's length are zero-filled on load, P is 0 there and in
 * key columns past it; outputs are written once, no atomics.
 */
#ifndef BWD
#define BWD 0
#endif
#ifndef CONS
#define CONS 1
#endif
#ifndef STAGES
#define STAGES 2
#endif
/* RPROD (rope): how the producer rotates -- 0: one item at a time, q, k
 * rotated in the slot; 1: the next item's copies issued before this one is
 * rotated (when its slot is free); 2: q, k read into registers, rotated
 * there and stored once (one item at a time); 3 (backward): as 0, and the
 * conjugate rotation of dq, dk is the producer's too -- the consumer stores
 * them unrotated, the producer rotates them in place (16-byte chunks, L2)
 * once the consumer has released the slot, so no rope work is left on the
 * MMA warps */
#ifndef RPROD
#define RPROD 0
#endif
/* the included epilogue reads a row's table pairs ahead (RPF 1) */
#define RPF (ROPE ? 1 : 0)
/* The backward at BLK 128, HD 128 without rope: q has two buffers (the
 * slot's q tile and one after the scratch, QB1), item i's in buffer i & 1,
 * each with a full and an empty barrier (buffer 0 the slot's, buffer 1
 * B_FQ1, B_EQ1): item i's q is copied as soon as item i - 2 is past its dK,
 * so it lands while item i - 1 still runs rather than after item i - 1's
 * last dK, and item i's S need not wait for it. The slot's other tiles are
 * refilled as they die, each on barriers of their own: k (full KV) and v
 * (under full DO, which the first dP waits for) once every consumer has
 * done dQ (empty KV), do (full DO, empty DO) after dV. dV runs before
 * dK, releasing do first: the next item's q is already in the other
 * buffer, its do is the copy still waiting. With rope the producer rotates q and k
 * together, one item at a time, in one slot. */
#define EARLY_REFILL (BWD && BLK == 128 && HD == 128 && !ROPE)

/* The backward at BLK 256 uses the chunked variant's helpers (the block
 * list's passes, the A-operand packing) */
#if BWD && BLK == 256
#define BLOCKATTN_BWD_CHUNKED_HELPERS
#endif
#define BLOCKATTN_HELPERS_ONLY
#define BLOCKATTN_BWD_HELPERS_ONLY
#include "blockattn_bwd.cu"
#undef BLOCKATTN_BWD_HELPERS_ONLY
#undef BLOCKATTN_HELPERS_ONLY

namespace kws {

using namespace kba;

static_assert(BLK == 64 || BLK == 128 || BLK == 256,
	      "BLK 64 (one m64 tile), 128 (two m64 halves) or 256 (chunks)");
static_assert(HD == 64 || HD == 128, "HD 64 or 128");
#if BWD && BLK == 128 && HD == 128
static_assert(STAGES == 1, "the backward at BLK 128, HD 128: one slot (128 KiB) beside the P, dS scratch");
#else
static_assert(STAGES >= 2 && STAGES >= CONS, "STAGES >= 2 and >= CONS");
#endif
static_assert(ROWS_W == 16 && DSPLIT == 1, "the epilogue helpers' warp layout: 16 rows");
static_assert(RPROD >= 0 && RPROD <= (BWD ? 3 : 2), "RPROD 0-2 (fwd), 0-3 (bwd)");
#if BWD
/* RPROD 3: dq, dk leave the consumers unrotated */
constexpr bool CROT = ROPE && RPROD != 3;
#endif

constexpr int PANEL = BLK * 128;	/* bytes of one 64-column panel */
constexpr int NTL = BWD ? 4 : 3;	/* tiles per slot */
constexpr int SLOT = NTL * TILE;
constexpr int PT = 128;			/* producer threads */
/* BLK 128: the m64 row halves of an item, SHARE consumers per item (the
 * forward's CONS, and the backward's at HD 128; 1 otherwise: each consumer
 * its own items); an item's
 * slot is empty after 128 * SHARE arrivals. HROWS: the bytes of 64 rows of
 * a panel, half 1's offset in a K-major operand. Enumerators, not
 * constexpr variables: NVRTC emits each namespace-scope constexpr as a
 * global, and new globals would move the BLK 64 kernels' bytes. */
enum : int {
	HALVES = BLK / 64,
	SHARE = BLK == 128 && (!BWD || HD == 128) ? CONS : 1,
	HROWS = 64 * 128,
	/* EARLY_REFILL: k's full and k, v's empty, then do's full (v lands
	 * under it too) and empty, then q's second buffer's full and empty,
	 * after the slot's (which then guard q's first buffer alone) */
	B_FKV = 2 * STAGES,
	B_EKV = 2 * STAGES + 1,
	B_FDO = 2 * STAGES + 2,
	B_EDO = 2 * STAGES + 3,
	B_FQ1 = 2 * STAGES + 4,
	B_EQ1 = 2 * STAGES + 5,
};
constexpr int IT = BLK * CH / PT;	/* chunks of a tile per producer thread */

/* Byte offset of 16-byte chunk c of row r in a panel-major swizzled tile. */
KT_DEV int pan_off(int r, int c)
{
	return (c >> 3) * PANEL + r * 128 + (((c & 7) ^ (r & 7)) << 4);
}

KT_DEV void load_pan(unsigned s, const __nv_bfloat16 *x, int t0, int len, int H, int h, int pt)
{
#pragma unroll
	for (int i = 0; i < IT; i++) {
		int idx = pt + i * PT, r = idx / CH, c = idx % CH;

		kt_cp_async16(s + pan_off(r, c),
			      x + ((long long)(t0 + min(r, len - 1)) * H + h) * HD + c * 8, r < len);
	}
}

/* bf16 pairs of a warp's 16 rows of an S-layout accumulator into a BLK x
 * BLK panel tile (row = query, column = key), as the MN-major A operand of
 * P^T x and dS^T x reads it. */
KT_DEV void put_pan(unsigned char *t, const float (&p)[NB][4], int r0, int lane)
{
#pragma unroll
	for (int hf = 0; hf < 2; hf++) {
		int row = r0 + (lane >> 2) + 8 * hf;

#pragma unroll
		for (int nt = 0; nt < NB; nt++) {
			int col = nt * 8 + 2 * (lane & 3);

			*reinterpret_cast<unsigned *>(t + pan_off(row, col >> 3) + (col & 7) * 2) =
				kt_pack_bf16x2(p[nt][2 * hf], p[nt][2 * hf + 1]);
		}
	}
}

/* An accumulator zeroed for the first wgmma of a group; with PIN also
 * pinned there, so that the zeroing moves stay above the wgmma fence that
 * follows. With kt_wg_zero alone ptxas sinks the backward's S and dP zeros
 * (the group that opens each item) below the fence and injects a
 * warpgroup.arrive of its own (C7519); on the loop's path from put_acc's
 * row tests that arrive is divergent, and ptxas then serializes every wgmma
 * of the kernel (C7520). The backward pins them at head_dim 128 only: the
 * unserialized form is faster there, but slower at head_dim 64, where the
 * serialized form stays (test_blockattn lets those programs through and
 * counts them; docs/families/blockattn.md has the figures). dQ, dV and dK
 * stay unpinned: pinning them changes nothing in ptxas's report. */
template <bool PIN, int N>
KT_DEV void zero_acc(float (&d)[N][4])
{
	kt_wg_zero(d);
	if (PIN)
		kt_wg_pin(d);
}

/* acc += A . B^T over HD, both K-major in 64-column panels apan and bpan
 * bytes apart, N rows of B: S = q k^T, dP = do v^T and their transposes.
 * The caller fences, commits and waits. */
template <int N>
KT_DEV void ss_hd(float (&acc)[N / 8][4], unsigned sa, unsigned apan, unsigned sb, unsigned bpan)
{
#pragma unroll
	for (int kk = 0; kk < HD / 16; kk++)
		kt_wg<N>::template ss<0, 0>(acc, kt_wg_desc_k(sa + (kk >> 2) * apan + (kk & 3) * 32),
					    kt_wg_desc_k(sb + (kk >> 2) * bpan + (kk & 3) * 32));
}

/* acc = S = A . B^T over HD (both K-major tiles): S = q k^T, dP = do v^T. */
KT_DEV void mma_s(float (&acc)[NB][4], unsigned sa, unsigned sb)
{
	ss_hd<BLK>(acc, sa, PANEL, sb, PANEL);
}

/* acc += P . X over the keys, P the register operand (S layout), X MN-major.
 * Every A fragment is packed before the fence, so that ptxas need not fence
 * between the wgmmas of the group. */
KT_DEV void mma_rx(float (&acc)[ND][4], const float (&p)[NB][4], unsigned sx)
{
	unsigned a[BLK / 16][4];

#pragma unroll
	for (int kk = 0; kk < BLK / 16; kk++)
		a_from_acc(a[kk], p, kk);
	kt_wg_fence();
#pragma unroll
	for (int kk = 0; kk < BLK / 16; kk++)
		kt_wg<HD>::rs<1>(acc, a[kk], kt_wg_desc_mn(sx + kk * 2048, PANEL));
}

/* acc += X^T . Y over the query rows, both MN-major tiles: dV = P^T do, dK = dS^T q. */
KT_DEV void mma_tt(float (&acc)[ND][4], unsigned sx, unsigned sy)
{
#pragma unroll
	for (int kk = 0; kk < BLK / 16; kk++)
		kt_wg<HD>::ss<1, 1>(acc, kt_wg_desc_mn(sx + kk * 2048, PANEL),
				    kt_wg_desc_mn(sy + kk * 2048, PANEL));
}

/* One row half's (hf) scores of a thread into p = 2^(s * sl2 - mb), in
 * place; returns their sum over this thread's columns (a quarter of the
 * row: the caller reduces over the quad). Shared by the exact softmax and
 * the block-256 forward's online one. */
template <int N>
KT_DEV float exp_half(float (&s)[N][4], int hf, float sl2, float mb)
{
	float sum = 0.f;

#pragma unroll
	for (int nt = 0; nt < N; nt++)
#pragma unroll
		for (int e = 0; e < 2; e++) {
			float p = kba_ex2(fmaf(s[nt][2 * hf + e], sl2, -mb));

			s[nt][2 * hf + e] = p;
			sum += p;
		}
	return sum;
}

#if BWD && BLK == 128
/* The backward at BLK 128: P and dS of an item are 128 x 128 bf16
 * (32 KiB each), kept as two P-halves of 64 query rows x 128 keys: two
 * 64-key panels of HROWS bytes, HTILE in all. HD 64: half 0's go to the
 * consumer's scratch (P, then dS), half 1's P into the slot's dead v tile
 * and its dS into the dead k tile (each 16 KiB: one P-half). HD 128: all
 * four P-halves in one scratch shared by the consumers (P half 0, 1, then
 * dS half 0, 1), the slot's tiles never written. */
enum : int {
	HTILE = 2 * HROWS,
	SEQ = CONS == 2,
	/* EARLY_REFILL: q's second buffer, after the slot, the mbarriers
	 * and the scratch (225 KiB in all) */
	QB1 = STAGES * SLOT + 1024 + 4 * HTILE,
};
#if EARLY_REFILL
static_assert(8 * (B_EQ1 + 1) <= 1024 && QB1 % 1024 == 0 && QB1 + TILE <= 227 * 1024,
	      "q's second buffer: its barriers within the 1 KiB, the buffer 1024-aligned "
	      "within sm_90a's 227 KiB");
#endif

/* Where a warp's pairs go in a P-half at shared address t (1024-aligned):
 * pair (n8 tile nt, row r0 + lane / 4 + 8 hf, columns nt * 8 + 2 (lane % 4)).
 * Row r's chunk c sits at r * 128 + ((c ^ r) & 7) * 16 (+ HROWS for keys
 * 64..), and t + x has x's bits 4-6: each store is one XOR of a per-call
 * base with an immediate offset. The base is opaque per call: hoisted out
 * of the item loop, the 32 addresses would not fit two consumers'
 * registers (ptxas spilled them). */
KT_DEV unsigned hput_base(unsigned t, int r0, int lane)
{
	unsigned x = t + (r0 + (lane >> 2)) * 128 + ((lane >> 2) << 4) + 4 * (lane & 3);

	asm volatile("" : "+r"(x));
	return x;
}

KT_DEV void hput(unsigned x, int nt, int hf, unsigned v)
{
	asm volatile("st.shared.b32 [%0], %1;\n" ::"r"((x ^ ((nt & 7) << 4)) + (nt >> 3) * HROWS +
							 hf * 1024),
		     "r"(v)
		     : "memory");
}

/* A warp's 16 rows (r0..) of P or dS, A fragments as a_from_acc packs them
 * (fragment kk holds n8 tiles 2kk, 2kk+1, rows r and r + 8:
 * a[kk][2 * (nt & 1) + hf]), into a P-half. */
KT_DEV void put_half(unsigned t, const unsigned (&a)[BLK / 16][4], int r0, int lane)
{
	const unsigned x = hput_base(t, r0, lane);

#pragma unroll
	for (int nt = 0; nt < NB; nt++) {
		hput(x, nt, 0, a[nt >> 1][2 * (nt & 1)]);
		hput(x, nt, 1, a[nt >> 1][2 * (nt & 1) + 1]);
	}
}

/* softmax_rows of one m64 half (MI 1), the same arithmetic, with the key
 * mask written as nt * 8 + e < len - 2 (lane % 4): an immediate against
 * one register, not 32 column indices that ptxas would keep live. */
KT_DEV void softmax_half(float (&s)[NB][4], float (&inv)[2], int len, int lane)
{
	const float sl2 = 1.4426950408889634f / sqrtf((float)HD);
	const int lim = len - 2 * (lane & 3);

#pragma unroll
	for (int hf = 0; hf < 2; hf++) {
		float m = KBA_NEG_INF, l, mb;

#pragma unroll
		for (int nt = 0; nt < NB; nt++)
#pragma unroll
			for (int e = 0; e < 2; e++) {
				float v = nt * 8 + e < lim ? s[nt][2 * hf + e] : KBA_NEG_INF;

				s[nt][2 * hf + e] = v;
				m = fmaxf(m, v);
			}
		m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
		m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
		mb = m * sl2;
		l = exp_half(s, hf, sl2, mb);
		l += __shfl_xor_sync(0xffffffffu, l, 1);
		l += __shfl_xor_sync(0xffffffffu, l, 2);
		inv[hf] = 1.f / l;
	}
}

/* bf2_widen by cvt.f32.bf16: the same values, other instructions. */
KT_DEV float2 bf2_cvt(unsigned u)
{
	float lo, hi;

	asm("{\n"
	    ".reg .b16 l, h;\n"
	    "mov.b32 {l, h}, %2;\n"
	    "cvt.f32.bf16 %0, l;\n"
	    "cvt.f32.bf16 %1, h;\n"
	    "}\n"
	    : "=f"(lo), "=f"(hi)
	    : "r"(u));
	return make_float2(lo, hi);
}

/* P and dS = P (dP - Di) / sqrt(d) of one m64 half (query rows row0.. of
 * this warp, row0 counted in the block), packed: S = q k^T and dP = do v^T
 * from the half's q, do rows (sqh, sdoh) and the item's k, v.
 * SEQ (two consumers, 168 registers a thread): S first, P packed, then dP,
 * so that 64 + 32 accumulator registers are live rather than 64 + 64 --
 * Di and dS then use the bf16 P, the value dV and the MMAs see anyway.
 * Otherwise S and dP in one group and fp32 P throughout, as at BLK 64. */
KT_DEV void half_p_ds(unsigned (&pa)[BLK / 16][4], unsigned (&a)[BLK / 16][4], unsigned sqh,
		      unsigned sk, unsigned sv, unsigned sdoh, int row0, int len, float scale,
		      int lane, unsigned fdo = 0, unsigned fdo_par = 0)
{
	float s[MI][NB][4], dp[MI][NB][4], inv[MI][2];
	/* EARLY_REFILL: do has its own full barrier (fdo, parity fdo_par),
	 * waited right before the first wgmma that reads it */
	auto do_landed = [&]() {
		if (EARLY_REFILL) {
			kt_mbar_wait(fdo, fdo_par);
			kt_fence_proxy_async();
		}
	};

	zero_acc<true>(s[0]);
	if (!SEQ) {
		zero_acc<true>(dp[0]);
		do_landed();
	}
	kt_wg_fence();
	mma_s(s[0], sqh, sk);
	if (!SEQ)
		mma_s(dp[0], sdoh, sv);
	kt_wg_commit();
	kt_wg_wait<0>();
	kt_wg_pin(s[0]);
	if (!SEQ)
		kt_wg_pin(dp[0]);

	softmax_half(s[0], inv[0], len, lane);
#pragma unroll
	for (int hf = 0; hf < 2; hf++) {
		int row = row0 + (lane >> 2) + 8 * hf;
		float norm = row < len ? inv[0][hf] : 0.f;

#pragma unroll
		for (int nt = 0; nt < NB; nt++)
#pragma unroll
			for (int e = 0; e < 2; e++)
				s[0][nt][2 * hf + e] *= norm;
	}
#pragma unroll
	for (int kk = 0; kk < BLK / 16; kk++)
		a_from_acc(pa[kk], s[0], kk);
	if (SEQ) {
		zero_acc<true>(dp[0]);
		do_landed();
		kt_wg_fence();
		mma_s(dp[0], sdoh, sv);
		kt_wg_commit();
		kt_wg_wait<0>();
		kt_wg_pin(dp[0]);
	}
	/* P: the fp32 one, or (SEQ) the packed one, widened where it is used
	 * -- by the other instruction the second time (cv), lest the compiler
	 * keep the 64 widened values of the first time live */
	auto pv = [&](int nt, int hf, int e, bool cv) {
		if (!SEQ)
			return s[0][nt][2 * hf + e];
		float2 p = cv ? bf2_cvt(pa[nt >> 1][2 * (nt & 1) + hf])
			      : bf2_widen(pa[nt >> 1][2 * (nt & 1) + hf]);

		return e ? p.y : p.x;
	};
#pragma unroll
	for (int hf = 0; hf < 2; hf++) {
		float di = 0.f;

#pragma unroll
		for (int nt = 0; nt < NB; nt++)
#pragma unroll
			for (int e = 0; e < 2; e++)
				di += pv(nt, hf, e, false) * dp[0][nt][2 * hf + e];
		di += __shfl_xor_sync(0xffffffffu, di, 1);
		di += __shfl_xor_sync(0xffffffffu, di, 2);
#pragma unroll
		for (int nt = 0; nt < NB; nt++)
#pragma unroll
			for (int e = 0; e < 2; e++)
				dp[0][nt][2 * hf + e] =
					pv(nt, hf, e, true) * (dp[0][nt][2 * hf + e] - di) * scale;
	}
#pragma unroll
	for (int kk = 0; kk < BLK / 16; kk++)
		a_from_acc(a[kk], dp[0], kk);
}

/* acc += X^T . Y for key tile mt (keys 64mt..) over the 128 query rows:
 * X^T the MN-major A operand from two P-halves (x0: rows 0-63, k16 steps
 * 0-3; x1: rows 64-127, steps 4-7), Y (q or do) MN-major: dV = P^T do,
 * dK = dS^T q. Always 8 steps: a branch inside the group makes ptxas
 * serialize every wgmma (C7520). When half 1 has no row within the length
 * x1 still holds v or k (finite) and Y's rows 64-127 are the zeros of
 * rows past the length, so steps 4-7 add 0. */
KT_DEV void mma_tt2(float (&acc)[ND][4], unsigned x0, unsigned x1, unsigned sy, int mt)
{
#pragma unroll
	for (int kk = 0; kk < BLK / 16; kk++)
		kt_wg<HD>::ss<1, 1>(acc,
				    kt_wg_desc_mn((kk < 4 ? x0 : x1) + mt * HROWS + (kk & 3) * 2048,
						  HROWS),
				    kt_wg_desc_mn(sy + kk * 2048, PANEL));
}

#if HD == 128
/* Zeros into a P-half at generic address t (this warpgroup's 128 threads,
 * 16 KiB): the P and dS of a half with no row within the length, which
 * the other half's dV and dK steps 4-7 (or 0-3) read against zero rows
 * of do and q. Written rather than skipped: a branch inside those groups
 * would serialize every wgmma (C7520), and the scratch's previous contents
 * (another item's, or uninitialized) need not be finite. */
KT_DEV void zero_half(unsigned char *t, int tw)
{
#pragma unroll
	for (int j = 0; j < HTILE / 16 / 128; j++)
		*reinterpret_cast<uint4 *>(t + (tw + j * 128) * 16) = make_uint4(0, 0, 0, 0);
}
#endif
#endif

/* The table chunks (bf16, 16 bytes: 4 pairs) of this thread's q, k chunks. */
struct ptab {
	uint4 u[IT];
};

/* Chunk x rotated by its table chunk u (widened to fp32 pairs). */
KT_DEV uint4 rot_by(uint4 x, uint4 u)
{
	float4 a, b;

	tab_widen(u, a, b);
	return rot_chunk_reg(x, a, b);
}

/* put_acc (blockattn_bwd.cu) in 16-byte stores at block 128, where nothing
 * is rotated (rope 0, or ROT false) and VEC: the quad of threads holding a
 * row has its n8 tiles 4g..4g+3 two columns a thread; two shuffle rounds
 * (a 4 x 4 transpose across the quad) hand thread t all eight columns of
 * tile 4g + t. A warp then stores a row's 64 bytes as whole sectors with a
 * quarter of the store instructions: the 4-byte stores filled the LSU
 * queue that the producer's copies share. Every thread shuffles; rows past
 * the length store nothing. VEC false where the registers do not allow it:
 * the block-128 backward's dv at head_dim 64 (with it, CONS 2 spilled 4
 * bytes; at block 64 the backward at head_dim 128 spilled 8). */
template <bool ROT, bool VEC = true>
KT_DEV void put_out(__nv_bfloat16 *x, float (&acc)[MI][ND][4], const rtab *table,
		    unsigned (&ct)[MI][2][ND], int r0, int d0, int t0, int len, int H, int h,
		    int lane)
{
	static_assert(ND % 4 == 0, "put_out: a quad's four n8 tiles");
	if ((ROPE && ROT) || BLK != 128 || !VEC) {
		put_acc<ROT, 0, false>(x, nullptr, acc, table, nullptr, ct, r0, d0, t0, len, H, h,
				       lane);
		return;
	}
	const int t = lane & 3;
	const bool b1 = t & 1, b2 = t & 2;

#pragma unroll
	for (int mi = 0; mi < MI; mi++)
#pragma unroll
		for (int hf = 0; hf < 2; hf++) {
			const int row = r0 + mi * 16 + (lane >> 2) + 8 * hf;

#pragma unroll
			for (int g = 0; g < ND / 4; g++) {
				unsigned u[4];

#pragma unroll
				for (int j = 0; j < 4; j++)
					u[j] = kt_pack_bf16x2(acc[mi][4 * g + j][2 * hf],
							      acc[mi][4 * g + j][2 * hf + 1]);
				/* lanes t, t ^ 1: each 2 x 2 block transposed */
#pragma unroll
				for (int m = 0; m < 2; m++) {
					unsigned v = __shfl_xor_sync(0xffffffffu,
								     b1 ? u[2 * m] : u[2 * m + 1], 1);

					if (b1)
						u[2 * m] = v;
					else
						u[2 * m + 1] = v;
				}
				/* lanes t, t ^ 2: the off-diagonal blocks swapped */
#pragma unroll
				for (int m = 0; m < 2; m++) {
					unsigned v = __shfl_xor_sync(0xffffffffu, b2 ? u[m] : u[2 + m], 2);

					if (b2)
						u[m] = v;
					else
						u[2 + m] = v;
				}
				if (row < len)
					*reinterpret_cast<uint4 *>(
						x + ((long long)(t0 + row) * H + h) * HD + d0 +
						(4 * g + t) * 8) = make_uint4(u[0], u[1], u[2], u[3]);
			}
		}
}

/* Producer: issues item i's copies into its slot (after the item STAGES
 * back has left it); one cp.async group per call, empty past the end (so
 * wait_group counts stay aligned). False past the end. */
KT_DEV bool issue(int i, unsigned sbase, unsigned bars, const __nv_bfloat16 *q,
		  const __nv_bfloat16 *k, const __nv_bfloat16 *v, const __nv_bfloat16 *dout,
		  const int2 *blocks, int nitems, int H, int cta_step, int item_step, int nper,
		  int pt, bool qk = true)
{
	int w = item_at(i, nitems, cta_step, item_step, nper), slot = i % STAGES;

	if (w < 0) {
		kt_cp_async_commit();
		return false;
	}
#if EARLY_REFILL
	{
		const int2 b = blocks[w / H];
		const int h = w % H, qb = i & 1;
		unsigned st = sbase;

		/* opaque per item: hoisted out of the producer's loop, the 64
		 * copies' addresses spilled (ptxas, 168 registers at CONS 2) */
		asm volatile("" : "+r"(st), "+r"(pt));
		/* q into buffer i & 1 once every consumer is past item i - 2's
		 * dK (phase (i >> 1) - 1 of that buffer's empty): in practice
		 * at once, item i - 1's do having waited for item i - 2's dV */
		if (i >= 2)
			kt_mbar_wait(bars + (qb ? B_EQ1 : STAGES) * 8, ((i >> 1) - 1) & 1);
		load_pan(st + qb * QB1, q, b.x, b.y, H, h, pt);
		kt_cp_async_commit();
		asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(
				     bars + (qb ? B_FQ1 : 0) * 8)
			     : "memory");
		/* k, v once every consumer is past item i - 1's dQ; k alone
		 * on full KV (S reads q and k), v on do's full (dP reads do
		 * and v) */
		if (i >= 1)
			kt_mbar_wait(bars + B_EKV * 8, (i - 1) & 1);
		load_pan(st + TILE, k, b.x, b.y, H, h, pt);
		kt_cp_async_commit();
		asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(
				     bars + B_FKV * 8)
			     : "memory");
		load_pan(st + 2 * TILE, v, b.x, b.y, H, h, pt);
		/* do once every consumer is past item i - 1's dV */
		if (i >= 1)
			kt_mbar_wait(bars + B_EDO * 8, (i - 1) & 1);
		load_pan(st + 3 * TILE, dout, b.x, b.y, H, h, pt);
		kt_cp_async_commit();
		asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(
				     bars + B_FDO * 8)
			     : "memory");
		return true;
	}
#endif
	if (i >= STAGES)	/* the item STAGES back has left the slot */
		kt_mbar_wait(bars + (STAGES + slot) * 8, ((i / STAGES) - 1) & 1);

	const int2 b = blocks[w / H];
	const int h = w % H;
	unsigned st = sbase + slot * SLOT;
#if BWD && BLK == 128 && HD == 128
	/* opaque per item: hoisted out of the producer's loop, the 64 copies'
	 * addresses spilled (ptxas, 168 registers at CONS 2) */
	asm volatile("" : "+r"(st), "+r"(pt));
#endif

	if (qk) {
		load_pan(st, q, b.x, b.y, H, h, pt);
		load_pan(st + TILE, k, b.x, b.y, H, h, pt);
	}
	load_pan(st + 2 * TILE, v, b.x, b.y, H, h, pt);
	if (BWD)
		load_pan(st + 3 * TILE, dout, b.x, b.y, H, h, pt);
	kt_cp_async_commit();
	if (!ROPE)	/* full[slot] gets this thread's arrival once its copies land */
		asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(
				     bars + slot * 8)
			     : "memory");
	return true;
}

/* ROPE: the table chunks of the q, k chunks this thread copies for item i
 * (rows clamped: no branch). */
KT_DEV void load_tab(int i, const int2 *blocks, const rtab *table, ptab &t, int nitems, int H,
		     int cta_step, int item_step, int nper, int pt)
{
	const int w = item_at(i, nitems, cta_step, item_step, nper);
	const int2 b = blocks[w / H];

#pragma unroll
	for (int j = 0; j < IT; j++) {
		int idx = pt + j * PT, r = min(idx / CH, b.y - 1), c = idx % CH;

		t.u[j] = tab_raw(table, b.x + r, c);
	}
}

/* RPROD 2: item i's q, k chunks of this thread, read into registers (rows
 * past the length as zeros) to be rotated there and stored once. */
struct pqk {
	uint4 q[IT], k[IT];
};

KT_DEV void load_qk(int i, const __nv_bfloat16 *q, const __nv_bfloat16 *k, const int2 *blocks,
		    pqk &x, int nitems, int H, int cta_step, int item_step, int nper, int pt)
{
	const int w = item_at(i, nitems, cta_step, item_step, nper);
	const int2 b = blocks[w / H];
	const int h = w % H;

#pragma unroll
	for (int j = 0; j < IT; j++) {
		int idx = pt + j * PT, r = idx / CH, c = idx % CH;
		long long off = ((long long)(b.x + min(r, b.y - 1)) * H + h) * HD + c * 8;
		uint4 zq = __ldg(reinterpret_cast<const uint4 *>(q + off));
		uint4 zk = __ldg(reinterpret_cast<const uint4 *>(k + off));
		const uint4 z = make_uint4(0, 0, 0, 0);

		x.q[j] = r < b.y ? zq : z;
		x.k[j] = r < b.y ? zk : z;
	}
}

/* RPROD 2: rotates item i's q, k chunks in registers and stores them into the
 * slot, then (once this thread's v, do copies have landed) arrives on full. */
KT_DEV void store_qk(int i, unsigned char *smem, unsigned bars, const pqk &x, const ptab &t)
{
	const int slot = i % STAGES;
	unsigned char *gq = smem + slot * SLOT, *gk = gq + TILE;
	const int pt = threadIdx.x & 127;

#pragma unroll
	for (int j = 0; j < IT; j++) {
		int idx = pt + j * PT, r = idx / CH, c = idx % CH;

		*reinterpret_cast<uint4 *>(gq + pan_off(r, c)) = rot_by(x.q[j], t.u[j]);
		*reinterpret_cast<uint4 *>(gk + pan_off(r, c)) = rot_by(x.k[j], t.u[j]);
	}
	kt_cp_async_wait<0>();
	/* ROPE 2: this thread's v chunks have landed; rotate them in place
	 * (rows past the length are zeros and stay zeros) */
#pragma unroll
	for (int j = 0; j < IT && ROPE_V; j++) {
		int idx = pt + j * PT, r = idx / CH, c = idx % CH;
		uint4 *pv = reinterpret_cast<uint4 *>(gq + 2 * TILE + pan_off(r, c));

		*pv = rot_by(*pv, t.u[j]);
	}
	kt_fence_proxy_async();
	kt_mbar_arrive(bars + slot * 8);
}

/* ROPE: once item i's copies have landed (the caller waited), each thread
 * rotates the q, k chunks it copied, then announces the slot full. */
KT_DEV void rotate(int i, unsigned char *smem, unsigned bars, const int2 *blocks, const ptab &t,
		   int nitems, int H, int cta_step, int item_step, int nper, int pt)
{
	const int w = item_at(i, nitems, cta_step, item_step, nper), slot = i % STAGES;
	const int len = blocks[w / H].y;
	unsigned char *gq = smem + slot * SLOT, *gk = gq + TILE, *gv = gq + 2 * TILE;

#pragma unroll
	for (int j = 0; j < IT; j++) {
		int idx = pt + j * PT, r = idx / CH, c = idx % CH;

		if (r < len) {
			uint4 *pq = reinterpret_cast<uint4 *>(gq + pan_off(r, c));
			uint4 *pk = reinterpret_cast<uint4 *>(gk + pan_off(r, c));

			*pq = rot_by(*pq, t.u[j]);
			*pk = rot_by(*pk, t.u[j]);
			if (ROPE_V) {
				uint4 *pv = reinterpret_cast<uint4 *>(gv + pan_off(r, c));

				*pv = rot_by(*pv, t.u[j]);
			}
		}
	}
	kt_fence_proxy_async();
	kt_mbar_arrive(bars + slot * 8);
}

/* RPROD 3: the conjugate rotation of one 16-byte chunk (4 bf16 pairs) of a
 * gradient, by its table chunk u: dx0 = dy0 c + dy1 s, dx1 = dy1 c - dy0 s. */
KT_DEV unsigned conj_pair(unsigned v, float c, float s)
{
	__nv_bfloat162 x = *reinterpret_cast<__nv_bfloat162 *>(&v);
	float y0 = __low2float(x), y1 = __high2float(x);

	rot_conj(y0, y1, c, s);
	return kt_pack_bf16x2(y0, y1);
}

KT_DEV uint4 conj_chunk(uint4 v, uint4 u)
{
	float4 a, b;

	tab_widen(u, a, b);
	v.x = conj_pair(v.x, a.x, a.y);
	v.y = conj_pair(v.y, a.z, a.w);
	v.z = conj_pair(v.z, b.x, b.y);
	v.w = conj_pair(v.w, b.z, b.w);
	return v;
}

/* RPROD 3: item j's dq and dk rows, stored unrotated by its consumer before
 * it arrived on empty[] (the caller waited on that: release/acquire at CTA
 * scope orders the global stores), conjugate-rotated in place. Loads go to
 * L2 (.cg): L1 is not coherent with the consumer's stores. Half of the
 * thread's chunks at a time, all their loads issued before any store (the
 * compiler cannot move a load above a store it may alias). */
KT_DEV void conj_out(int j, __nv_bfloat16 *dq, __nv_bfloat16 *dk, const int2 *blocks,
		     const rtab *table, int nitems, int H, int cta_step, int item_step, int nper,
		     int pt)
{
	constexpr int HALF = IT / 2 > 0 ? IT / 2 : 1;
	const int w = item_at(j, nitems, cta_step, item_step, nper);
	const int2 b = blocks[w / H];
	const int h = w % H;

#pragma unroll
	for (int j0 = 0; j0 < IT; j0 += HALF) {
		uint4 vq[HALF], vk[HALF], tu[HALF];

#pragma unroll
		for (int jj = 0; jj < HALF; jj++) {
			int idx = pt + (j0 + jj) * PT, r = idx / CH, c = idx % CH;
			long long off = ((long long)(b.x + r) * H + h) * HD + c * 8;

			if (r < b.y) {
				tu[jj] = tab_raw(table, b.x + r, c);
				vq[jj] = __ldcg(reinterpret_cast<const uint4 *>(dq + off));
				vk[jj] = __ldcg(reinterpret_cast<const uint4 *>(dk + off));
			}
		}
#pragma unroll
		for (int jj = 0; jj < HALF; jj++) {
			int idx = pt + (j0 + jj) * PT, r = idx / CH, c = idx % CH;
			long long off = ((long long)(b.x + r) * H + h) * HD + c * 8;

			if (r < b.y) {
				*reinterpret_cast<uint4 *>(dq + off) = conj_chunk(vq[jj], tu[jj]);
				*reinterpret_cast<uint4 *>(dk + off) = conj_chunk(vk[jj], tu[jj]);
			}
		}
	}
}

/* 1 when the phase of parity `parity` of bar has completed; never blocks. */
KT_DEV bool mbar_done(unsigned bar, unsigned parity)
{
	unsigned done;

	asm volatile("{\n"
		     ".reg .pred p;\n"
		     "mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n"
		     "selp.u32 %0, 1, 0, p;\n"
		     "}\n"
		     : "=r"(done)
		     : "r"(bar), "r"(parity)
		     : "memory");
	return done != 0;
}

/* The producer warpgroup's whole life. Without rope it only issues (the
 * copies arrive on full[] by themselves) and runs STAGES items ahead. With
 * rope and RPROD 0 it takes one item at a time (issue, wait, rotate); with
 * RPROD 2 the same, q and k through registers; with RPROD 1 item i+1's
 * copies go out before it waits for item i's -- but only
 * when i+1's slot is already free: waiting for a slot there would hold
 * item i back behind the consumer of item i+1-STAGES (measured: +40% at
 * STAGES 2). Item i+1's table is read right after item i is rotated (one
 * table set in registers). */
KT_DEV void producer(unsigned char *smem, unsigned sbase, unsigned bars, const __nv_bfloat16 *q,
		     const __nv_bfloat16 *k, const __nv_bfloat16 *v, const __nv_bfloat16 *dout,
		     const int2 *blocks, const rtab *table, __nv_bfloat16 *dq, __nv_bfloat16 *dk,
		     int nitems, int H, int cta_step, int item_step, int nper, int pt)
{
	ptab t;

	if (!ROPE) {
		for (int i = 0; issue(i, sbase, bars, q, k, v, dout, blocks, nitems, H, cta_step,
				      item_step, nper, pt);
		     i++)
			;
	} else if (RPROD == 2) {
		/* one item at a time: v, do copied, q, k and the table read into
		 * registers, rotated there and stored */
		pqk x;

		for (int i = 0; issue(i, sbase, bars, q, k, v, dout, blocks, nitems, H, cta_step,
				      item_step, nper, pt, false);
		     i++) {
			load_qk(i, q, k, blocks, x, nitems, H, cta_step, item_step, nper, pt);
			load_tab(i, blocks, table, t, nitems, H, cta_step, item_step, nper, pt);
			store_qk(i, smem, bars, x, t);
		}
	} else if (RPROD == 0 || RPROD == 3) {
		/* one item at a time: copies and table reads, wait, rotate; with
		 * RPROD 3 first the outputs of item i - STAGES, whose slot issue()
		 * has just waited for (before the table reads: registers) */
		int i = 0;

		for (; issue(i, sbase, bars, q, k, v, dout, blocks, nitems, H, cta_step, item_step,
			     nper, pt);
		     i++) {
			if (RPROD == 3 && i >= STAGES)
				conj_out(i - STAGES, dq, dk, blocks, table, nitems, H, cta_step,
					 item_step, nper, pt);
			load_tab(i, blocks, table, t, nitems, H, cta_step, item_step, nper, pt);
			kt_cp_async_wait<0>();
			rotate(i, smem, bars, blocks, t, nitems, H, cta_step, item_step, nper, pt);
		}
		/* RPROD 3: the last STAGES items, each after its consumer's release */
		for (int j = i - STAGES < 0 ? 0 : i - STAGES; RPROD == 3 && j < i; j++) {
			kt_mbar_wait(bars + (STAGES + j % STAGES) * 8, (j / STAGES) & 1);
			conj_out(j, dq, dk, blocks, table, nitems, H, cta_step, item_step, nper, pt);
		}
	} else if (issue(0, sbase, bars, q, k, v, dout, blocks, nitems, H, cta_step, item_step,
			 nper, pt)) {
		load_tab(0, blocks, table, t, nitems, H, cta_step, item_step, nper, pt);
		for (int i = 0;; i++) {
			const int n = i + 1;
			const bool more = item_at(n, nitems, cta_step, item_step, nper) >= 0;
			/* one decision per warp (lane 0): no divergence inside a warp */
			const bool ahead =
				more && __shfl_sync(0xffffffffu,
						    n < STAGES || mbar_done(bars + (STAGES + n % STAGES) * 8,
									    ((n / STAGES) - 1) & 1),
						    0);

			if (ahead) {
				issue(n, sbase, bars, q, k, v, dout, blocks, nitems, H, cta_step,
				      item_step, nper, pt);
				kt_cp_async_wait<1>();	/* item i's group */
			} else {
				kt_cp_async_wait<0>();
			}
			rotate(i, smem, bars, blocks, t, nitems, H, cta_step, item_step, nper, pt);
			if (!more)
				break;
			if (!ahead)
				issue(n, sbase, bars, q, k, v, dout, blocks, nitems, H, cta_step,
				      item_step, nper, pt);
			load_tab(n, blocks, table, t, nitems, H, cta_step, item_step, nper, pt);
		}
	}
	kt_cp_async_wait<0>();
}

/* Consumer: item i of the CTA, once its slot is full (false past the end):
 * w, the block (first token, length) and head, and the slot's first tile. */
struct citem {
	int w, slot, h, len;
	int2 b;
	unsigned sq;		/* q's tile; k, v, do follow, TILE bytes apart
				 * (EARLY_REFILL: the slot's q tile, q's buffer 0) */
	unsigned char *gq;	/* the same, generic */
};

KT_DEV bool take(int i, unsigned char *smem, unsigned sbase, unsigned bars, const int2 *blocks,
		 int nitems, int H, int cta_step, int item_step, int nper, citem &it)
{
	it.w = item_at(i, nitems, cta_step, item_step, nper);
	it.slot = i % STAGES;
	if (it.w < 0)
		return false;
#if EARLY_REFILL
	/* q's buffer i & 1: a phase of its full every second item */
	kt_mbar_wait(bars + ((i & 1) ? B_FQ1 : 0) * 8, (i >> 1) & 1);
#else
	kt_mbar_wait(bars + it.slot * 8, (i / STAGES) & 1);
#endif
	kt_fence_proxy_async();
	it.b = blocks[it.w / H];
	it.h = it.w % H;
	it.len = it.b.y;
	it.sq = sbase + it.slot * SLOT;
	it.gq = smem + it.slot * SLOT;
	return true;
}

#if BLK == 256
/* Byte offset of 16-byte chunk c of row r in a tile of P-byte panels. */
template <int P>
KT_DEV int wpan_off(int r, int c)
{
	return (c >> 3) * P + r * 128 + (((c & 7) ^ (r & 7)) << 4);
}

/* cp.async of the block's rows [r0, r0 + R) (head h, block at t0) of x
 * into a tile of R-row panels; rows at or past len zero-filled. */
template <int R>
KT_DEV void wload(unsigned s, const __nv_bfloat16 *x, int t0, int r0, int len, int H, int h,
		  int pt)
{
#pragma unroll
	for (int i = 0; i < R * CH / PT; i++) {
		int idx = pt + i * PT, r = idx / CH, c = idx % CH;

		kt_cp_async16(s + wpan_off<R * 128>(r, c),
			      x + ((long long)(t0 + min(r0 + r, len - 1)) * H + h) * HD + c * 8,
			      r0 + r < len);
	}
}

#endif

#if BLK == 256 && !BWD
/*
 * The forward at BLK 256. S of a row tile over the whole block would be
 * 128 fp32 a thread, and a slot of q, k, v 192 KiB at HD 128, so the item
 * is cut both ways: rounds of QR = 64 CONS query rows (consumer c takes
 * the m64 row tile QR r + 64 c of round r) and chunks of KC keys. The
 * producer runs every CTA step in order -- per item, per round: the
 * round's q rows into one of two q slots, then each key chunk's k and v
 * into one of STAGES k/v slots -- and every consumer takes every step
 * (a consumer whose row tile lies past the length only waits and
 * releases), so a slot is empty after 128 CONS arrivals. Per chunk S =
 * q k^T (K-major), the online softmax (raw-score running max, one FFMA +
 * ex2 an element, O and the row sum rescaled when the max grows), O += P
 * v (P the register A operand, v MN-major). Each round streams the
 * block's k, v again (from L2): that is what keeps a consumer at one row
 * tile (S of a chunk plus O) and the whole ring in 227 KiB.
 * Enumerators, as above; only BLK 256 programs see them.
 */
enum : int {
	/* keys per chunk: S of a chunk beside O is 96 fp32 a thread at
	 * either head_dim; 128-key chunks at HD 128 spill with rope and two
	 * consumers (ptxas) */
	KC = HD == 64 ? 128 : 64,
	NBK = KC / 8,			/* n8 tiles across a chunk of S */
	QR = 64 * CONS,			/* query rows of a round */
	QPAN = QR * 128,		/* a 64-column panel of the round's q rows */
	KPAN = KC * 128,		/* of a k or v chunk */
	QSLOT = QR * HD * 2,
	KSLOT = 2 * KC * HD * 2,	/* k, then v */
	QSLOTS = 2,
	/* the barriers after the rings: q full, q empty, k/v full, k/v empty */
	RINGS = QSLOTS * QSLOT + STAGES * KSLOT,
	B_QF = 0,
	B_QE = QSLOTS,
	B_KF = 2 * QSLOTS,
	B_KE = 2 * QSLOTS + STAGES,
	NBARS = 2 * QSLOTS + 2 * STAGES,
};
static_assert(RINGS % 1024 == 0 && QSLOT % 1024 == 0 && KSLOT % 1024 == 0,
	      "128-byte swizzle: every tile 1024-aligned");
static_assert(RPROD <= 1, "BLK 256: RPROD 0 or 1");

/* A step of a CTA's sequence: item i (w its index, -1 past the end), round
 * r, and c < 0 for the round's q rows or key chunk c; gq and gk count the
 * q and k/v steps before it (slot and phase). */
struct wcur {
	int i, w, t0, h, len, nr, nc, r, c, gq, gk;
};

KT_DEV void wc_item(wcur &u, const int2 *blocks, int nitems, int H, int cta_step, int item_step,
		    int nper)
{
	u.w = item_at(u.i, nitems, cta_step, item_step, nper);
	u.r = 0;
	u.c = -1;
	if (u.w >= 0) {
		const int2 b = blocks[u.w / H];

		u.t0 = b.x;
		u.len = b.y;
		u.h = u.w % H;
		u.nr = ((u.len + 63) / 64 + CONS - 1) / CONS;
		u.nc = (u.len + KC - 1) / KC;
	}
}

KT_DEV void wc_next(wcur &u, const int2 *blocks, int nitems, int H, int cta_step, int item_step,
		    int nper)
{
	if (u.c < 0)
		u.gq++;
	else
		u.gk++;
	if (++u.c < u.nc)
		return;
	u.c = -1;
	if (++u.r < u.nr)
		return;
	u.i++;
	wc_item(u, blocks, nitems, H, cta_step, item_step, nper);
}

/* The step's slot (shared address) and its full and empty barriers. */
KT_DEV unsigned wc_slot(const wcur &u, unsigned sbase, unsigned bars, unsigned &full,
			unsigned &empty, int &n, int &slots)
{
	if (u.c < 0) {
		n = u.gq;
		slots = QSLOTS;
		full = bars + (B_QF + n % QSLOTS) * 8;
		empty = bars + (B_QE + n % QSLOTS) * 8;
		return sbase + (n % QSLOTS) * QSLOT;
	}
	n = u.gk;
	slots = STAGES;
	full = bars + (B_KF + n % STAGES) * 8;
	empty = bars + (B_KE + n % STAGES) * 8;
	return sbase + QSLOTS * QSLOT + (n % STAGES) * KSLOT;
}

/* 1 when the step's slot is free now (never blocks). */
KT_DEV bool wp_free(const wcur &u, unsigned sbase, unsigned bars)
{
	unsigned full, empty;
	int n, slots;

	wc_slot(u, sbase, bars, full, empty, n, slots);
	return n < slots || mbar_done(empty, ((n / slots) - 1) & 1);
}

/* Producer: the step's copies into its slot (after the step `slots` back
 * has left it), one cp.async group. */
KT_DEV void wp_issue(const wcur &u, unsigned sbase, unsigned bars, const __nv_bfloat16 *q,
		     const __nv_bfloat16 *k, const __nv_bfloat16 *v, int H, int pt)
{
	unsigned full, empty;
	int n, slots;
	const unsigned st = wc_slot(u, sbase, bars, full, empty, n, slots);

	if (n >= slots)
		kt_mbar_wait(empty, ((n / slots) - 1) & 1);
	if (u.c < 0) {
		wload<QR>(st, q, u.t0, u.r * QR, u.len, H, u.h, pt);
	} else {
		wload<KC>(st, k, u.t0, u.c * KC, u.len, H, u.h, pt);
		wload<KC>(st + KC * HD * 2, v, u.t0, u.c * KC, u.len, H, u.h, pt);
	}
	kt_cp_async_commit();
	if (!ROPE)
		asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(full)
			     : "memory");
}

/* ROPE: the chunks of R rows (from row r0 of the block) this thread copied
 * into the tile at s (and s2, v's, with ROPE_V), rotated once they have
 * landed (LATER: one more group, the next step's, may stay in flight);
 * the table chunks are read first, their latency overlapping the wait. */
template <int R>
KT_DEV void wp_rot(unsigned char *s, unsigned char *s2, const rtab *table, int t0, int r0, int len,
		   bool later, int pt)
{
	uint4 t[R * CH / PT];

#pragma unroll
	for (int j = 0; j < R * CH / PT; j++) {
		int idx = pt + j * PT;

		t[j] = tab_raw(table, t0 + min(r0 + idx / CH, len - 1), idx % CH);
	}
	if (later)
		kt_cp_async_wait<1>();
	else
		kt_cp_async_wait<0>();
#pragma unroll
	for (int j = 0; j < R * CH / PT; j++) {
		int idx = pt + j * PT, r = idx / CH, c = idx % CH;

		if (r0 + r < len) {
			uint4 *p = reinterpret_cast<uint4 *>(s + wpan_off<R * 128>(r, c));

			*p = rot_by(*p, t[j]);
			if (s2) {
				uint4 *p2 = reinterpret_cast<uint4 *>(s2 + wpan_off<R * 128>(r, c));

				*p2 = rot_by(*p2, t[j]);
			}
		}
	}
}

/* The producer at BLK 256: every step in order. Without rope it only
 * issues. With rope, RPROD 0: issue, wait, rotate (q, or k and with
 * ROPE_V v), one step at a time; RPROD 1: the next step's copies issued
 * before this one is rotated when its slot is already free (a lane-0
 * decision per warp, as producer() makes it). */
KT_DEV void producer256(unsigned char *smem, unsigned sbase, unsigned bars,
			const __nv_bfloat16 *q, const __nv_bfloat16 *k, const __nv_bfloat16 *v,
			const int2 *blocks, const rtab *table, int nitems, int H, int cta_step,
			int item_step, int nper, int pt)
{
	wcur u;

	u.i = u.gq = u.gk = 0;
	wc_item(u, blocks, nitems, H, cta_step, item_step, nper);
	if (!ROPE) {
		for (; u.w >= 0; wc_next(u, blocks, nitems, H, cta_step, item_step, nper))
			wp_issue(u, sbase, bars, q, k, v, H, pt);
	} else if (u.w >= 0) {
		wp_issue(u, sbase, bars, q, k, v, H, pt);
		for (;;) {
			wcur n = u;

			wc_next(n, blocks, nitems, H, cta_step, item_step, nper);
			const bool more = n.w >= 0;
			const bool ahead =
				RPROD == 1 && more &&
				__shfl_sync(0xffffffffu, wp_free(n, sbase, bars), 0);
			unsigned full, empty;
			int m, slots;
			const unsigned st = wc_slot(u, sbase, bars, full, empty, m, slots);
			unsigned char *g = smem + (st - sbase);

			if (ahead)
				wp_issue(n, sbase, bars, q, k, v, H, pt);
			if (u.c < 0)
				wp_rot<QR>(g, nullptr, table, u.t0, u.r * QR, u.len, ahead, pt);
			else
				wp_rot<KC>(g, ROPE_V ? g + KC * HD * 2 : nullptr, table, u.t0,
					   u.c * KC, u.len, ahead, pt);
			kt_fence_proxy_async();
			kt_mbar_arrive(full);
			if (!more)
				break;
			if (!ahead)
				wp_issue(n, sbase, bars, q, k, v, H, pt);
			u = n;
		}
	}
	kt_cp_async_wait<0>();
}

/* One key chunk [k0, k0 + KC) into a consumer's row tile: S = q k^T (sq:
 * the tile's first row in the round's q panels, sk the chunk's k), the
 * online softmax into the running max m (raw scores), this thread's part
 * of the row sum l and O (acc), O += P v (sv). Keys at or past len are
 * masked; the first chunk starts from m = -inf, l = O = 0 (its rescale is
 * by 0) and holds key 0, so the max is finite. */
KT_DEV void attend_kc(float (&acc)[ND][4], float (&m)[2], float (&l)[2], unsigned sq, unsigned sk,
		      unsigned sv, int k0, int len, int lane)
{
	const float sl2 = 1.4426950408889634f / sqrtf((float)HD);
	const int lim = len - k0 - 2 * (lane & 3);
	float s[NBK][4];
	unsigned a[KC / 16][4];

	zero_acc<true>(s);
	kt_wg_fence();
	ss_hd<KC>(s, sq, QPAN, sk, KPAN);
	kt_wg_commit();
	kt_wg_wait<0>();
	kt_wg_pin(s);

#pragma unroll
	for (int hf = 0; hf < 2; hf++) {
		float mc = m[hf], ls, alpha, mb;

#pragma unroll
		for (int nt = 0; nt < NBK; nt++)
#pragma unroll
			for (int e = 0; e < 2; e++) {
				if (nt * 8 + e >= lim)
					s[nt][2 * hf + e] = KBA_NEG_INF;
				mc = fmaxf(mc, s[nt][2 * hf + e]);
			}
		mc = fmaxf(mc, __shfl_xor_sync(0xffffffffu, mc, 1));
		mc = fmaxf(mc, __shfl_xor_sync(0xffffffffu, mc, 2));
		alpha = kba_ex2((m[hf] - mc) * sl2);
		m[hf] = mc;
		mb = mc * sl2;
		ls = exp_half(s, hf, sl2, mb);
		l[hf] = l[hf] * alpha + ls;
#pragma unroll
		for (int nt = 0; nt < ND; nt++) {
			acc[nt][2 * hf] *= alpha;
			acc[nt][2 * hf + 1] *= alpha;
		}
	}
	/* every A fragment packed before the fence (mma_rx) */
#pragma unroll
	for (int kk = 0; kk < KC / 16; kk++) {
		a[kk][0] = kt_pack_bf16x2(s[2 * kk][0], s[2 * kk][1]);
		a[kk][1] = kt_pack_bf16x2(s[2 * kk][2], s[2 * kk][3]);
		a[kk][2] = kt_pack_bf16x2(s[2 * kk + 1][0], s[2 * kk + 1][1]);
		a[kk][3] = kt_pack_bf16x2(s[2 * kk + 1][2], s[2 * kk + 1][3]);
	}
	kt_wg_fence();
#pragma unroll
	for (int kk = 0; kk < KC / 16; kk++)
		kt_wg<HD>::rs<1>(acc, a[kk], kt_wg_desc_mn(sv + kk * 2048, KPAN));
	kt_wg_commit();
	kt_wg_wait<0>();
	kt_wg_pin(acc);
}
#endif

#if BLK == 256 && BWD
/*
 * The backward at BLK 256: the chunked variant's plan (blockattn_bwd.cu,
 * KCH set) on wgmma, in persistent CTAs. Two kernels; a unit is one pass
 * of DPR = 64 CONS rows of one (block, head) (nitems * QP units, QP = 4 /
 * CONS, passes fastest; one past its block's length is skipped), CTA b
 * running units b, b + gridDim.x, ..., consumer c owning the pass's m64
 * row tile c. Per unit the producer copies the pass's two tiles once into
 * pass set i % 2 of its i-th unit (full, empty: while the consumers work on
 * one set the next unit's tiles land in the other), then chunks of KCH =
 * 64 rows of the other side of the block into a ring of STAGES slots
 * (full, empty; every consumer takes every chunk, so a slot is empty after
 * 128 CONS arrivals) that runs on from unit to unit, its phases carried
 * over. A pass set is empty once every consumer has stored its outputs
 * from it. A consumer whose tile lies wholly past the length only waits
 * and releases.
 *   blockattn_bwd_dq: q, do rows stay; k, v chunks stream twice. Sweep 1:
 *     S = q k^T, dP = do v^T (one group, K-major), a running row max, sum
 *     and Di = sum P dP (rescaled as the max grows), then the rows' (LSE in
 *     log2, Di) into the scratch (blocks + stats_at). Sweep 2: S, dP again,
 *     P = 2^(S log2e / sqrt(d) - LSE), dS = P (dP - Di) / sqrt(d),
 *     dQ += dS k (dS the register A operand, k MN-major). With DQ_ONE
 *     the chunks stream once: the statistics and dQ in one sweep
 *     (dq_one).
 *   blockattn_bwd_dkv: k, v rows stay; q, do chunks and their statistics
 *     stream once. S^T = k q^T; P^T by each query column's LSE, packed to
 *     bf16; dV += P^T do (register A, do MN-major) and dP^T = v do^T in one
 *     group; dS^T = P^T (dP^T - Di) / sqrt(d) from the bf16 P^T; dK += dS^T q.
 * The math is the chunked kernels'. Rows past the length are zero-filled
 * (and their statistics read as 0), key columns past it get P = 0; rows
 * past it are computed and not stored. Each consumer stages its outputs
 * in its own rows of the unit's pass set (dead by then) and stores 16-byte
 * rows (with rope conjugate-rotated: dq, dk, and dv with ROPE_V). With
 * rope the producer rotates what it copied (q and k, and v with ROPE_V)
 * before it publishes a step (RPROD 0's way). The producer hands its
 * registers to the consumers (setmaxnreg) at CONS 2, and at CONS 1 where
 * two CTAs share an SM.
 * Shared memory: two pass sets of two tiles (DPR-row panels), STAGES
 * slots of two chunk tiles (KCH-row panels), STAGES x KCH statistics
 * pairs (dK, dV only), the barriers.
 */
static_assert(KCH == 64 && QP * 64 * CONS == BLK, "BLK 256 backward: KCH 64, QP = 4 / CONS");
static_assert(RPROD == 0, "BLK 256 backward: RPROD 0 (the producer rotates a step at a time)");
enum : int {
	DPR = 64 * CONS,		/* rows of the pass */
	DPPAN = DPR * 128,		/* a 64-column panel of a pass tile */
	DCPAN = KCH * 128,		/* of a chunk tile */
	DPTL = DPR * HD * 2,		/* a pass tile (dQ: q, then do; dK, dV: k, then v) */
	DCTL = KCH * HD * 2,		/* a chunk tile (dQ: k, then v; dK, dV: q, then do) */
	DRSLOT = 2 * DCTL,
	DPSET = 2 * DPTL,		/* a pass set: the pass's two tiles */
	DRING0 = 2 * DPSET,		/* the chunk ring, after both sets */
	DSTAT0 = DRING0 + STAGES * DRSLOT,	/* KCH (LSE, Di) pairs a slot */
	DBAR0 = DSTAT0 + STAGES * KCH * 8,
	/* full[STAGES], empty[STAGES] of the ring; full[2], empty[2] of
	 * the pass sets */
	DB_F = 0,
	DB_E = STAGES,
	DB_PF = 2 * STAGES,
	DB_PE = 2 * STAGES + 2,
	/* CONS 2 (setmaxnreg): producer, consumers; 128 x DREG_P + 256 x
	 * DREG_C is the launch's 384 x 168 */
	DREG_P = ROPE ? 56 : 40,
	DREG_C = ROPE ? 224 : 232,
	/* CONS 1 where two CTAs' shared memory (each the launch's DBAR0 +
	 * 1024 and the 1 KiB an SM reserves a CTA) fits the SM's 228 KiB
	 * (kernels/blockattn.c plans as many CTAs an SM): two CTAs an SM, so
	 * that one's epilogue (staging, stores) overlaps the other's MMAs.
	 * The launch then gives 128 registers a thread; the producer hands
	 * its spare to the consumer (setmaxnreg DREG_P1 / DREG_C1; ptxas: with
	 * rope a producer of 56 spills at HD 64, and at HD 128 a consumer of
	 * 200 serializes the dK, dV wgmmas) */
	DMINB = CONS == 1 && 2 * (DBAR0 + 2048) <= 228 * 1024 ? 2 : 1,
	DREG_P1 = !ROPE ? 40 : HD == 64 ? 64 : 48,
	DREG_C1 = 256 - DREG_P1,
	/* the dQ kernel in one sweep (dq_one) where its second accumulator
	 * fits the registers: not with rope's larger producer at head_dim 64,
	 * CONS 1 (setmaxnreg 192) or at head_dim 128, CONS 2 (224), where
	 * ptxas spills 16-40 bytes */
	DQ_ONE = !ROPE || (HD == 64 ? CONS == 2 : CONS == 1),
};
static_assert(CONS != 2 || PT * DREG_P + 256 * DREG_C <= 384 * 168, "setmaxnreg within the launch's");
static_assert(DMINB == 1 || 128 * DREG_P1 + 128 * DREG_C1 <= 256 * 128, "setmaxnreg within the launch's");
static_assert(DPTL % 1024 == 0 && DCTL % 1024 == 0, "128-byte swizzle: every tile 1024-aligned");

/* 8-byte copy (.ca: .cg takes 16 only); zero-filled when !pred. */
KT_DEV void cp_async8(unsigned dst, const void *src, bool pred)
{
	int n = pred ? 8 : 0;

	asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(dst), "l"(src), "r"(n));
}

KT_DEV void arrive_noinc(unsigned bar)
{
	asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}

/* ROPE: the chunks of tile s (and s2, when not null) of R rows (from row r0
 * of the block; P-byte panels) this thread copied, rotated in place once
 * they have landed: four table chunks read, then four rotated (rolled: the
 * producer has few registers). */
template <int R, int P>
KT_DEV void wsb_rot(unsigned char *s, unsigned char *s2, const rtab *table, int t0, int r0,
		    int len, int pt)
{
	static_assert((R * CH / PT) % 4 == 0, "four chunks at a time");
#pragma unroll 1
	for (int i0 = 0; i0 < R * CH / PT; i0 += 4) {
		uint4 t[4];

#pragma unroll
		for (int j = 0; j < 4; j++) {
			const int idx = pt + (i0 + j) * PT;

			t[j] = tab_raw(table, t0 + min(r0 + idx / CH, len - 1), idx % CH);
		}
#pragma unroll
		for (int j = 0; j < 4; j++) {
			const int idx = pt + (i0 + j) * PT, r = idx / CH, c = idx % CH;

			if (r0 + r < len) {
				uint4 *x = reinterpret_cast<uint4 *>(s + wpan_off<P>(r, c));

				*x = rot_by(*x, t[j]);
				if (s2) {
					uint4 *y = reinterpret_cast<uint4 *>(s2 + wpan_off<P>(r, c));

					*y = rot_by(*y, t[j]);
				}
			}
		}
	}
}

/* A group's copies are published on bar: without rope by the copies
 * themselves (cp.async.mbarrier.arrive.noinc); with rope once this thread
 * has rotated its own chunks of the group (rot: the caller's rotation,
 * after the wait for its copies) and fenced them for the async proxy. */
template <typename F>
KT_DEV void wsb_publish(unsigned bar, F rot)
{
	if (!ROPE) {
		arrive_noinc(bar);
		return;
	}
	kt_cp_async_wait<0>();
	rot();
	kt_fence_proxy_async();
	kt_mbar_arrive(bar);
}

/* The persistent walk over the units. Every warpgroup walks the same
 * units from the block list, so all agree on which are skipped and on
 * every barrier's phase; each unit's list entry is loaded a unit ahead. */
struct wsb_walk {
	int u, n;	/* the next unit, the units' count */
	int2 b;		/* the block list's entry of unit u */
};

KT_DEV void wsb_walk_init(wsb_walk &w, const int2 *blocks, int nitems, int H)
{
#if BOUND
	nitems = bound_items(blocks, nitems, H);
#endif
	w.u = blockIdx.x;
	w.n = nitems * QP;
	if (w.u < w.n)
		w.b = blocks[w.u / QP / H];
}

/* The next unit of this CTA (its block's first token and length, the
 * head, the pass's first row); false past the last. */
KT_DEV bool wsb_next(wsb_walk &w, const int2 *blocks, int H, int &t0, int &len, int &h, int &pr0)
{
	while (w.u < w.n) {
		const int u = w.u;
		const int2 b = w.b;

		/* u + gridDim.x may pass 2^31 */
		if (w.n - u > (int)gridDim.x) {
			w.u = u + gridDim.x;
			w.b = blocks[w.u / QP / H];
		} else {
			w.u = w.n;
		}
		if (u % QP * DPR < b.y) {
			t0 = b.x;
			len = b.y;
			h = u / QP % H;
			pr0 = u % QP * DPR;
			return true;
		}
	}
	return false;
}

/* The producer of either kernel, unit after unit: the pass's rows of p1,
 * p2 (dK, dV: k and v; dQ: q and do) once into pass set i % 2 of its i-th
 * unit, once the consumers have left the unit two back; then the block's
 * chunks of c1, c2 (q, do with their statistics, a row a thread; dQ: k, v,
 * every chunk twice, once for each sweep, once with DQ_ONE) into slot g % STAGES of
 * ring step g (counted over all units), once the step STAGES back has
 * left it. Without rope it only issues: each group arrives on its full
 * barrier when its copies land. With rope it takes one step at a time
 * (issue, wait, rotate, publish): the pass's p1 (q or k), and v with
 * ROPE_V, and every chunk's c1 (k or q), and v with ROPE_V. */
template <bool DQ>
KT_DEV void wsb_produce(unsigned char *smem, unsigned sbase, unsigned bars,
			const __nv_bfloat16 *p1, const __nv_bfloat16 *p2, const __nv_bfloat16 *c1,
			const __nv_bfloat16 *c2, const float2 *stats, const rtab *table,
			const int2 *blocks, int nitems, int H, int pt)
{
	wsb_walk w;
	int t0, len, h, pr0;
	unsigned g = 0;

	wsb_walk_init(w, blocks, nitems, H);
#pragma unroll 1
	for (unsigned it = 0; wsb_next(w, blocks, H, t0, len, h, pr0); it++) {
		const unsigned ps = it & 1, sp = sbase + ps * DPSET;
		const int nch = (len + KCH - 1) / KCH;

		if (it >= 2)
			kt_mbar_wait(bars + (DB_PE + ps) * 8, ((it >> 1) - 1) & 1);
		/* rolled: unrolled, the 2 x 16 copies' addresses spill the
		 * producer */
#pragma unroll 1
		for (int i = 0; i < DPR * CH / PT; i++) {
			const int idx = pt + i * PT, r = idx / CH, c = idx % CH;
			const long long off =
				((long long)(t0 + min(pr0 + r, len - 1)) * H + h) * HD + c * 8;

			kt_cp_async16(sp + wpan_off<DPPAN>(r, c), p1 + off, pr0 + r < len);
			kt_cp_async16(sp + DPTL + wpan_off<DPPAN>(r, c), p2 + off, pr0 + r < len);
		}
		kt_cp_async_commit();
		wsb_publish(bars + (DB_PF + ps) * 8, [&] {
			unsigned char *g1 = smem + ps * DPSET;

			wsb_rot<DPR, DPPAN>(g1, !DQ && ROPE_V ? g1 + DPTL : nullptr, table, t0, pr0,
					    len, pt);
		});
#pragma unroll 1
		for (int j = 0; j < (DQ && !DQ_ONE ? 2 : 1) * nch; j++, g++) {
			const int s = g % STAGES, c = DQ && !DQ_ONE && j >= nch ? j - nch : j;
			unsigned st = sbase + DRING0 + s * DRSLOT;
			int ptc = pt;

			/* opaque per chunk: hoisted out of the loop, the copies'
			 * addresses spill the producer's few registers */
			asm volatile("" : "+r"(ptc), "+r"(st));
			const int r = c * KCH + ptc;

			if (g >= STAGES)
				kt_mbar_wait(bars + (DB_E + s) * 8, ((g / STAGES) - 1) & 1);
			wload<KCH>(st, c1, t0, c * KCH, len, H, h, ptc);
			wload<KCH>(st + DCTL, c2, t0, c * KCH, len, H, h, ptc);
			if (!DQ && ptc < KCH)
				cp_async8(sbase + DSTAT0 + (s * KCH + ptc) * 8,
					  stats + (long long)(t0 + min(r, len - 1)) * H + h, r < len);
			kt_cp_async_commit();
			wsb_publish(bars + (DB_F + s) * 8, [&] {
				unsigned char *gc = smem + (st - sbase);

				wsb_rot<KCH, DCPAN>(gc, DQ && ROPE_V ? gc + DCTL : nullptr, table, t0,
						    c * KCH, len, ptc);
			});
		}
	}
	kt_cp_async_wait<0>();
}

/* dQ: S = q k^T and dP = do v^T of a consumer's query tile (sq, sdo: its
 * first row in the pass's q and do panels) against the chunk in slot sk
 * (k, then v), one group. */
KT_DEV void dq_sdp(float (&x)[kba::NBC][4], float (&y)[kba::NBC][4], unsigned sq, unsigned sdo,
		   unsigned sk)
{
	const unsigned sv = sk + DCTL;

	zero_acc<true>(x);
	zero_acc<true>(y);
	kt_wg_fence();
	ss_hd<KCH>(x, sq, DPPAN, sk, DCPAN);
	ss_hd<KCH>(y, sdo, DPPAN, sv, DCPAN);
	kt_wg_commit();
	kt_wg_wait<0>();
	kt_wg_pin(x);
	kt_wg_pin(y);
}

/* dQ's row statistics over one chunk, rows hf of this thread's two: S to
 * the log2 domain (past the length -inf), the running row max m, and this
 * thread's parts of the sum l and of Di = sum_j P_ij dP_ij, both rescaled
 * when the max grows. With KEEP, x is left holding p = 2^(S - m). Returns
 * the rescale factor. lim: as in dkv_chunk. */
template <bool KEEP>
KT_DEV float dq_stats(float (&x)[kba::NBC][4], const float (&y)[kba::NBC][4], float (&m)[2],
		      float (&l)[2], float (&di)[2], int lim, int hf)
{
	const float sl2 = 1.4426950408889634f / sqrtf((float)HD);
	float mc = m[hf], ls = 0.f, ds = 0.f, alpha;

#pragma unroll
	for (int nt = 0; nt < kba::NBC; nt++)
#pragma unroll
		for (int e = 0; e < 2; e++) {
			const float v = nt * 8 + e < lim ? x[nt][2 * hf + e] * sl2 : KBA_NEG_INF;

			x[nt][2 * hf + e] = v;
			mc = fmaxf(mc, v);
		}
	mc = fmaxf(mc, __shfl_xor_sync(0xffffffffu, mc, 1));
	mc = fmaxf(mc, __shfl_xor_sync(0xffffffffu, mc, 2));
	alpha = exp2f(m[hf] - mc);
	m[hf] = mc;
#pragma unroll
	for (int nt = 0; nt < kba::NBC; nt++)
#pragma unroll
		for (int e = 0; e < 2; e++) {
			const float pe = exp2f(x[nt][2 * hf + e] - mc);

			if (KEEP)
				x[nt][2 * hf + e] = pe;
			ls += pe;
			ds += pe * y[nt][2 * hf + e];
		}
	l[hf] = l[hf] * alpha + ls;
	di[hf] = di[hf] * alpha + ds;
	return alpha;
}

/* dQ, sweep 1, one chunk: the statistics (blockattn_bwd_dq's sweep 1). */
KT_DEV void dq_run(float (&x)[kba::NBC][4], const float (&y)[kba::NBC][4], float (&m)[2],
		   float (&l)[2], float (&di)[2], int lim)
{
#pragma unroll
	for (int hf = 0; hf < 2; hf++)
		dq_stats<false>(x, y, m, l, di, lim, hf);
}

/* dQ, sweep 2, one chunk: P = exp2(S log2e / sqrt(d) - LSE) (0 past the
 * length), dS = P (dP - Di) / sqrt(d), dQ += dS k (dS the register
 * operand, the chunk's k MN-major). */
KT_DEV void dq_acc(float (&acc)[ND][4], float (&x)[kba::NBC][4], const float (&y)[kba::NBC][4],
		   const float (&m)[2], const float (&di)[2], unsigned sk, int lim)
{
	const float sl2 = 1.4426950408889634f / sqrtf((float)HD), scale = 1.f / sqrtf((float)HD);
	unsigned da[KCH / 16][4];

#pragma unroll
	for (int hf = 0; hf < 2; hf++)
#pragma unroll
		for (int nt = 0; nt < kba::NBC; nt++)
#pragma unroll
			for (int e = 0; e < 2; e++) {
				const float pe = nt * 8 + e < lim
							 ? exp2f(x[nt][2 * hf + e] * sl2 - m[hf])
							 : 0.f;

				x[nt][2 * hf + e] = pe * (y[nt][2 * hf + e] - di[hf]) * scale;
			}
	kba::pack_a(da, x);
	kt_wg_fence();
#pragma unroll
	for (int kk = 0; kk < KCH / 16; kk++)
		kt_wg<HD>::rs<1>(acc, da[kk], kt_wg_desc_mn(sk + kk * 2048, DCPAN));
	kt_wg_commit();
	kt_wg_wait<0>();
	kt_wg_pin(acc);
}

/* dQ in one sweep (DQ_ONE), one chunk. With p = 2^(S log2e / sqrt(d) - m)
 * under the running max m, l = sum p and c = (sum p dP) / l (the running
 * Di, complete after the last chunk), it keeps
 *   a = sum p (dP - c) k,  b = sum p k
 * over the chunks so far: both rescaled as m grows, a recentred by
 * (c_old - c) b as c moves, then this chunk's two products (p (dP - c) and
 * p the register operands, k MN-major) in one group. After the last chunk
 * dQ = a / (l sqrt(d)) = sum P (dP - Di) k / sqrt(d), with no second pass
 * over k and v; centring on the running Di keeps the bf16 operand as
 * small as dS is. l, di: this thread's parts, as dq_stats's; lq: the row's l. */
KT_DEV void dq_one(float (&a)[ND][4], float (&b)[ND][4], float (&x)[kba::NBC][4],
		   const float (&y)[kba::NBC][4], float (&m)[2], float (&l)[2], float (&di)[2],
		   float (&c)[2], float (&lq)[2], unsigned sk, int lim)
{
	unsigned pa[KCH / 16][4], da[KCH / 16][4];

#pragma unroll
	for (int hf = 0; hf < 2; hf++) {
		const float alpha = dq_stats<true>(x, y, m, l, di, lim, hf);
		float dt, cn;

		lq[hf] = l[hf];
		lq[hf] += __shfl_xor_sync(0xffffffffu, lq[hf], 1);
		lq[hf] += __shfl_xor_sync(0xffffffffu, lq[hf], 2);
		dt = di[hf];
		dt += __shfl_xor_sync(0xffffffffu, dt, 1);
		dt += __shfl_xor_sync(0xffffffffu, dt, 2);
		cn = dt / lq[hf];
#pragma unroll
		for (int nt = 0; nt < ND; nt++)
#pragma unroll
			for (int e = 0; e < 2; e++) {
				const float bs = b[nt][2 * hf + e] * alpha;

				a[nt][2 * hf + e] = fmaf(c[hf] - cn, bs, a[nt][2 * hf + e] * alpha);
				b[nt][2 * hf + e] = bs;
			}
		c[hf] = cn;
	}
	/* p (dP - c) from the packed p, as dkv_chunk's dS from its bf16 P:
	 * x is dead once packed, which leaves room for b at head_dim 128 */
	kba::pack_a(pa, x);
#pragma unroll
	for (int nt = 0; nt < kba::NBC; nt++)
#pragma unroll
		for (int e = 0; e < 4; e++)
			x[nt][e] = kba::packed_at(pa, nt, e) * (y[nt][e] - c[e >> 1]);
	kba::pack_a(da, x);
	kt_wg_fence();
#pragma unroll
	for (int kk = 0; kk < KCH / 16; kk++) {
		const unsigned long long dk = kt_wg_desc_mn(sk + kk * 2048, DCPAN);

		kt_wg<HD>::rs<1>(a, da[kk], dk);
		kt_wg<HD>::rs<1>(b, pa[kk], dk);
	}
	kt_wg_commit();
	kt_wg_wait<0>();
	kt_wg_pin(a);
	kt_wg_pin(b);
}

/* One query chunk [k0, k0 + KCH) into a consumer's key tile (sk, sv: its
 * first row in the pass's k and v panels): dV and dK accumulate. sq: the
 * chunk's slot (q, then do), st its statistics. */
KT_DEV void dkv_chunk(float (&adk)[ND][4], float (&adv)[ND][4], unsigned sk, unsigned sv,
		      unsigned sq, const float2 *st, int k0, int len, int lane)
{
	const float sl2 = 1.4426950408889634f / sqrtf((float)HD), scale = 1.f / sqrtf((float)HD);
	const unsigned sdo = sq + DCTL;
	/* query column nt * 8 + e of this thread (+ 2 (lane % 4)) is within
	 * the length when nt * 8 + e < lim */
	const int lim = len - k0 - 2 * (lane & 3), cq = 2 * (lane & 3);
	float x[kba::NBC][4], y[kba::NBC][4];
	unsigned pa[KCH / 16][4], da[KCH / 16][4];

	/* S^T = k q^T */
	zero_acc<true>(x);
	kt_wg_fence();
	ss_hd<KCH>(x, sk, DPPAN, sq, DCPAN);
	kt_wg_commit();
	kt_wg_wait<0>();
	kt_wg_pin(x);
	/* P^T, by each query column's LSE */
#pragma unroll
	for (int nt = 0; nt < kba::NBC; nt++)
#pragma unroll
		for (int e = 0; e < 2; e++) {
			const float lse = st[nt * 8 + cq + e].x;
			const bool ok = nt * 8 + e < lim;

			x[nt][e] = ok ? exp2f(x[nt][e] * sl2 - lse) : 0.f;
			x[nt][2 + e] = ok ? exp2f(x[nt][2 + e] * sl2 - lse) : 0.f;
		}
	kba::pack_a(pa, x);
	/* dV += P^T do and dP^T = v do^T, one group */
	zero_acc<true>(y);
	kt_wg_fence();
#pragma unroll
	for (int kk = 0; kk < KCH / 16; kk++)
		kt_wg<HD>::rs<1>(adv, pa[kk], kt_wg_desc_mn(sdo + kk * 2048, DCPAN));
	ss_hd<KCH>(y, sv, DPPAN, sdo, DCPAN);
	kt_wg_commit();
	kt_wg_wait<0>();
	kt_wg_pin(y);
	/* dS^T */
#pragma unroll
	for (int nt = 0; nt < kba::NBC; nt++)
#pragma unroll
		for (int e = 0; e < 2; e++) {
			const float dd = st[nt * 8 + cq + e].y;

			y[nt][e] = kba::packed_at(pa, nt, e) * (y[nt][e] - dd) * scale;
			y[nt][2 + e] = kba::packed_at(pa, nt, 2 + e) * (y[nt][2 + e] - dd) * scale;
		}
	kba::pack_a(da, y);
	/* dK += dS^T q */
	kt_wg_fence();
#pragma unroll
	for (int kk = 0; kk < KCH / 16; kk++)
		kt_wg<HD>::rs<1>(adk, da[kk], kt_wg_desc_mn(sq + kk * 2048, DCPAN));
	kt_wg_commit();
	kt_wg_wait<0>();
	kt_wg_pin(adk);
}

/* A warp's 16 rows (r0..) of acc as bf16 into the pass's panels at t (the
 * consumer's own rows of a pass tile, dead once its last wgmma is waited). */
KT_DEV void wsb_stage(unsigned char *t, const float (&acc)[ND][4], int r0, int lane)
{
#pragma unroll
	for (int hf = 0; hf < 2; hf++) {
		const int row = r0 + (lane >> 2) + 8 * hf;

#pragma unroll
		for (int nt = 0; nt < ND; nt++) {
			const int col = nt * 8 + 2 * (lane & 3);

			*reinterpret_cast<unsigned *>(t + wpan_off<DPPAN>(row, col >> 3) + (col & 7) * 2) =
				kt_pack_bf16x2(acc[nt][2 * hf], acc[nt][2 * hf + 1]);
		}
	}
}

/* The staged 64 rows at t (pass rows from prow on) to x, 16 bytes a copy,
 * rows at or past len left out; conjugate-rotated with ROT (the gradient
 * of the raw input). */
template <bool ROT>
KT_DEV void wsb_store(__nv_bfloat16 *x, const unsigned char *t, const rtab *table, int t0,
		      int prow, int len, int H, int h, int ct)
{
#pragma unroll
	for (int i = 0; i < 64 * CH / 128; i++) {
		const int idx = ct + i * 128, r = idx / CH, c = idx % CH;

		if (prow + r < len) {
			uint4 v = *reinterpret_cast<const uint4 *>(t + wpan_off<DPPAN>(r, c));

			if (ROT)
				v = conj_chunk(v, tab_raw(table, t0 + prow + r, c));
			*reinterpret_cast<uint4 *>(x + ((long long)(t0 + prow + r) * H + h) * HD + c * 8) =
				v;
		}
	}
}
#endif

} /* namespace kws */

#define KWS_BODY_BEGIN                                                                     \
	using namespace kws;                                                               \
	extern __shared__ __align__(1024) unsigned char smem[];                            \
	const unsigned sbase = kt_smem_u32(smem);                                          \
	const unsigned bars = sbase + STAGES * SLOT;                                       \
	const int tid = threadIdx.x, wgi = tid >> 7;                                      \
	if (tid == 0) {                                                                    \
		for (int s = 0; s < STAGES; s++) {                                         \
			kt_mbar_init(bars + s * 8, PT);                                    \
			kt_mbar_init(bars + (STAGES + s) * 8, 128 * SHARE);                \
		}                                                                          \
		if (EARLY_REFILL) {                                                        \
			kt_mbar_init(bars + B_FKV * 8, PT);                                \
			kt_mbar_init(bars + B_EKV * 8, 128 * SHARE);                       \
			kt_mbar_init(bars + B_FDO * 8, PT);                                \
			kt_mbar_init(bars + B_EDO * 8, 128 * SHARE);                       \
			kt_mbar_init(bars + B_FQ1 * 8, PT);                                \
			kt_mbar_init(bars + B_EQ1 * 8, 128 * SHARE);                       \
		}                                                                          \
		kt_mbar_init_fence();                                                      \
	}                                                                                  \
	__syncthreads();

#if BWD && BLK == 256
/* blockattn_bwd_dq(q, k, v, do, blocks, table, dq, dk, dv, nitems, H, stats_at)
 * and blockattn_bwd_dkv(same arguments): block (CONS + 1) * 128, any grid
 * of at most nitems * QP CTAs (each walks units blockIdx.x, + gridDim.x,
 * ...: pass u % QP of item u / QP), dynamic smem DBAR0 + 1024 each. dq
 * runs first and writes the statistics from entry stats_at of blocks; dkv
 * reads them. */
#define KWSB_BEGIN                                                                         \
	using namespace kws;                                                               \
	extern __shared__ __align__(1024) unsigned char smem[];                            \
	const unsigned sbase = kt_smem_u32(smem), bars = sbase + DBAR0;                    \
	const int tid = threadIdx.x, wgi = tid >> 7;                                      \
	if (tid == 0) {                                                                    \
		for (int s = 0; s < STAGES; s++) {                                         \
			kt_mbar_init(bars + (DB_F + s) * 8, PT);                           \
			kt_mbar_init(bars + (DB_E + s) * 8, 128 * CONS);                   \
		}                                                                          \
		for (int s = 0; s < 2; s++) {                                              \
			kt_mbar_init(bars + (DB_PF + s) * 8, PT);                          \
			kt_mbar_init(bars + (DB_PE + s) * 8, 128 * CONS);                  \
		}                                                                          \
		kt_mbar_init_fence();                                                      \
	}                                                                                  \
	__syncthreads();

/* At CONS 2 the producer hands registers to the consumers: at the
 * launch's 168 the consumers' accumulators spill (ptxas). With rope the
 * producer's rotation needs 56 (at 40 it spills). At CONS 1 with two CTAs
 * an SM (DMINB) the same from the launch's 128. */
#define KWSB_PRODUCER_REGS                                                                 \
	if (CONS > 1)                                                                      \
		KT_ASM_90A("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"((int)DREG_P) : "memory"); \
	else if (DMINB > 1)                                                                \
		KT_ASM_90A("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"((int)DREG_P1) : "memory");
#define KWSB_CONSUMER_REGS                                                                 \
	if (CONS > 1)                                                                      \
		KT_ASM_90A("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"((int)DREG_C) : "memory"); \
	else if (DMINB > 1)                                                                \
		KT_ASM_90A("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"((int)DREG_C1) : "memory");

extern "C" __global__ void __launch_bounds__((CONS + 1) * 128, kws::DMINB)
blockattn_bwd_dq(const __nv_bfloat16 *__restrict__ q, const __nv_bfloat16 *__restrict__ k,
		 const __nv_bfloat16 *__restrict__ v, const __nv_bfloat16 *__restrict__ dout,
		 int2 *__restrict__ blocks, const __nv_bfloat16 *__restrict__ table,
		 __nv_bfloat16 *__restrict__ dq, __nv_bfloat16 *__restrict__ dk,
		 __nv_bfloat16 *__restrict__ dv, int nitems, int H, int stats_at)
{
	KWSB_BEGIN
	if (wgi == 0) {
		KWSB_PRODUCER_REGS
		wsb_produce<true>(smem, sbase, bars, q, dout, k, v, nullptr, table, blocks, nitems,
				  H, tid);
		return;
	}
	KWSB_CONSUMER_REGS

	const int cw = wgi - 1, lane = tid & 31, r0 = ((tid >> 5) & 3) * 16;
	/* written here, read by blockattn_bwd_dkv (the next launch) */
	float2 *stats = reinterpret_cast<float2 *>(blocks + stats_at);
	wsb_walk w;
	int t0, len, h, pr0;
	unsigned g = 0;

	wsb_walk_init(w, blocks, nitems, H);
#pragma unroll 1
	for (unsigned it = 0; wsb_next(w, blocks, H, t0, len, h, pr0); it++) {
		const unsigned ps = it & 1;
		const int nch = (len + KCH - 1) / KCH;
		/* this consumer's query tile; one wholly past the length only
		 * waits and releases (warpgroup-uniform) */
		const bool act = pr0 + 64 * cw < len;
		unsigned char *const tq = smem + ps * DPSET + cw * HROWS;
		const unsigned sq = sbase + ps * DPSET + cw * HROWS, sdo = sq + DPTL;
		float acc[ND][4], accb[ND][4], m[2] = {KBA_NEG_INF, KBA_NEG_INF}, l[2] = {0.f, 0.f},
				  di[2] = {0.f, 0.f}, cen[2] = {0.f, 0.f}, lq[2] = {1.f, 1.f};

		kt_wg_zero(acc);
		if (DQ_ONE)
			kt_wg_zero(accb);
		kt_mbar_wait(bars + (DB_PF + ps) * 8, (it >> 1) & 1);
		kt_fence_proxy_async();
		/* steps 0 .. nch - 1: sweep 1 (the statistics; with DQ_ONE dQ
		 * too, the only sweep); nch .. 2 nch - 1: sweep 2 (dQ) */
#pragma unroll 1
		for (int j = 0; j < (DQ_ONE ? 1 : 2) * nch; j++, g++) {
			const int s = g % STAGES, c = j < nch ? j : j - nch;
			const unsigned sk = sbase + DRING0 + s * DRSLOT;

			kt_mbar_wait(bars + (DB_F + s) * 8, (g / STAGES) & 1);
			kt_fence_proxy_async();
			if (act) {
				const int lim = len - c * KCH - 2 * (lane & 3);
				float x[kba::NBC][4], y[kba::NBC][4];

				dq_sdp(x, y, sq, sdo, sk);
				if (DQ_ONE)
					dq_one(acc, accb, x, y, m, l, di, cen, lq, sk, lim);
				else if (j >= nch)
					dq_acc(acc, x, y, m, di, sk, lim);
				else
					dq_run(x, y, m, l, di, lim);
			}
			/* every thread has waited its last wgmma on the slot */
			kt_mbar_arrive(bars + (DB_E + s) * 8);
			if (act && j == nch - 1)
				kba::put_stats(m, l, di, pr0 + 64 * cw + r0, lane, len, stats, t0, H, h);
		}
		if (DQ_ONE && act) {
			const float f[2] = {1.f / (sqrtf((float)HD) * lq[0]),
					    1.f / (sqrtf((float)HD) * lq[1])};

#pragma unroll
			for (int nt = 0; nt < ND; nt++)
#pragma unroll
				for (int e = 0; e < 4; e++)
					acc[nt][e] *= f[e >> 1];
		}
		if (act) {
			/* every warp's wgmmas on this consumer's q rows are done
			 * before they are overwritten; the staged rows are whole
			 * before they leave */
			kt_bar_sync(1 + cw, 128);
			wsb_stage(tq, acc, r0, lane);
			kt_bar_sync(1 + cw, 128);
			wsb_store<(ROPE != 0)>(dq, tq, table, t0, pr0 + 64 * cw, len, H, h, tid & 127);
		}
		/* the set is the producer's again once every consumer thread's
		 * stores have read their staged rows */
		kt_mbar_arrive(bars + (DB_PE + ps) * 8);
	}
}

extern "C" __global__ void __launch_bounds__((CONS + 1) * 128, kws::DMINB)
blockattn_bwd_dkv(const __nv_bfloat16 *__restrict__ q, const __nv_bfloat16 *__restrict__ k,
		  const __nv_bfloat16 *__restrict__ v, const __nv_bfloat16 *__restrict__ dout,
		  const int2 *__restrict__ blocks, const __nv_bfloat16 *__restrict__ table,
		  __nv_bfloat16 *__restrict__ dq, __nv_bfloat16 *__restrict__ dk,
		  __nv_bfloat16 *__restrict__ dv, int nitems, int H, int stats_at)
{
	KWSB_BEGIN
	if (wgi == 0) {
		KWSB_PRODUCER_REGS
		wsb_produce<false>(smem, sbase, bars, k, v, q, dout,
				   reinterpret_cast<const float2 *>(blocks + stats_at), table, blocks,
				   nitems, H, tid);
		return;
	}
	KWSB_CONSUMER_REGS

	const int cw = wgi - 1, lane = tid & 31, r0 = ((tid >> 5) & 3) * 16;
	wsb_walk w;
	int t0, len, h, pr0;
	unsigned g = 0;

	wsb_walk_init(w, blocks, nitems, H);
#pragma unroll 1
	for (unsigned it = 0; wsb_next(w, blocks, H, t0, len, h, pr0); it++) {
		const unsigned ps = it & 1;
		const int nch = (len + KCH - 1) / KCH;
		/* this consumer's key tile; one wholly past the length only
		 * waits and releases (warpgroup-uniform) */
		const bool act = pr0 + 64 * cw < len;
		unsigned char *const tk = smem + ps * DPSET + cw * HROWS;
		const unsigned sk = sbase + ps * DPSET + cw * HROWS, sv = sk + DPTL;
		float adk[ND][4], adv[ND][4];

		kt_wg_zero(adk);
		kt_wg_zero(adv);
		kt_mbar_wait(bars + (DB_PF + ps) * 8, (it >> 1) & 1);
		kt_fence_proxy_async();
#pragma unroll 1
		for (int c = 0; c < nch; c++, g++) {
			const int s = g % STAGES;

			kt_mbar_wait(bars + (DB_F + s) * 8, (g / STAGES) & 1);
			kt_fence_proxy_async();
			if (act)
				dkv_chunk(adk, adv, sk, sv, sbase + DRING0 + s * DRSLOT,
					  reinterpret_cast<const float2 *>(smem + DSTAT0 + s * KCH * 8),
					  c * KCH, len, lane);
			/* every thread has waited its last wgmma on the slot */
			kt_mbar_arrive(bars + (DB_E + s) * 8);
		}
		if (act) {
			/* every warp's wgmmas on this consumer's k, v rows are
			 * done before they are overwritten; the staged rows are
			 * whole before they leave */
			kt_bar_sync(1 + cw, 128);
			wsb_stage(tk, adk, r0, lane);
			wsb_stage(tk + DPTL, adv, r0, lane);
			kt_bar_sync(1 + cw, 128);
			wsb_store<(ROPE != 0)>(dk, tk, table, t0, pr0 + 64 * cw, len, H, h, tid & 127);
			wsb_store<ROPE_V>(dv, tk + DPTL, table, t0, pr0 + 64 * cw, len, H, h,
					  tid & 127);
		}
		/* the set is the producer's again once every consumer thread's
		 * stores have read their staged rows */
		kt_mbar_arrive(bars + (DB_PE + ps) * 8);
	}
}
#undef KWSB_BEGIN
#undef KWSB_PRODUCER_REGS
#undef KWSB_CONSUMER_REGS
#elif BWD
extern "C" __global__ void __launch_bounds__((CONS + 1) * 128, 1)
blockattn_bwd_ws(const __nv_bfloat16 *__restrict__ q, const __nv_bfloat16 *__restrict__ k,
		 const __nv_bfloat16 *__restrict__ v, const __nv_bfloat16 *__restrict__ dout,
		 const int2 *__restrict__ blocks, const __nv_bfloat16 *__restrict__ table,
		 __nv_bfloat16 *__restrict__ dq, __nv_bfloat16 *__restrict__ dk,
		 __nv_bfloat16 *__restrict__ dv, int nitems, int H, int cta_step, int item_step,
		 int nper)
{
	KWS_BODY_BEGIN
#if BOUND
	nitems = kba::bound_items(blocks, nitems, H);
#endif
	if (wgi == 0) {
		producer(smem, sbase, bars, q, k, v, dout, blocks, table, dq, dk, nitems, H,
			 cta_step, item_step, nper, tid);
		return;
	}

	const int cw = wgi - 1, lane = tid & 31, r0 = ((tid >> 5) & 3) * 16;
	const float scale = 1.f / sqrtf((float)HD);
	unsigned ct[MI][2][ND];	/* unused: the epilogue reads its pairs per row */

#if BLK == 128 && HD == 128
	/* The one slot (q, k, v, do: 128 KiB) is shared by the CONS consumers:
	 * consumer c takes query halves c, c + CONS (S, dP, P, Di, dS, dQ),
	 * then, once every half's P and dS is in the scratch, key tiles c,
	 * c + CONS (dV = P^T do, dK = dS^T q over all 128 query rows).
	 * Named barrier 1 over the 128 CONS consumer threads: A, before a
	 * half's P and dS are written (every consumer has waited the
	 * previous item's dV, dK, the scratch's last readers); B, after every
	 * half's P and dS are written (and fenced to the async proxy), before
	 * dV and dK read them. The slot is empty after 128 CONS arrivals,
	 * each thread's after its last wgmma that reads the slot. With
	 * EARLY_REFILL item i's q is in buffer i & 1 (the slot's q tile or
	 * QB1), whose full take() waits (parity (i >> 1) & 1) and whose empty
	 * each thread arrives on after its last dK (S and every dK, the
	 * reads of q, complete); k, v and do have full and empty barriers of
	 * their own: k's full waited before S, do's (which covers v too)
	 * right before the first dP, k, v's empty arrived on after B (every
	 * dQ waited: nothing reads k or v after it), do's after the thread's
	 * last dV. dV runs before dK: do is released first.
	 * Scratch, after the barriers: P half 0, 1, dS half 0, 1 (HTILE each);
	 * EARLY_REFILL: q's buffer 1 after it. */
	const unsigned scr = bars + 1024;
	unsigned char *const gscr = smem + STAGES * SLOT + 1024;
	const int ctid = tid - 128;	/* 0 .. 128 CONS - 1 */

	for (int i = 0;; i++) {
		citem it;

		if (!take(i, smem, sbase, bars, blocks, nitems, H, cta_step, item_step, nper, it))
			break;

		const int2 b = it.b;
		const int h = it.h, len = it.len, slot = it.slot;
		const unsigned st = it.sq, sk = st + TILE, sv = st + 2 * TILE, sdo = st + 3 * TILE;
		/* EARLY_REFILL: q's buffer i & 1 */
		const unsigned sq = EARLY_REFILL && (i & 1) ? sbase + QB1 : st;
		float acc[MI][ND][4];

		if (EARLY_REFILL) {	/* take() waited for q; k (v, do) land on their own */
			kt_mbar_wait(bars + B_FKV * 8, i & 1);
			kt_fence_proxy_async();
		}
#pragma unroll 1
		for (int hv = cw; hv < HALVES; hv += CONS) {
			/* P and dS of the half's 64 query rows, bf16 in the A
			 * fragments' layout (a_from_acc) */
			unsigned pa[BLK / 16][4], a[BLK / 16][4];
			const bool live = 64 * hv < len;	/* warpgroup-uniform */

			if (live)
				half_p_ds(pa, a, sq + hv * HROWS, sk, sv, sdo + hv * HROWS, 64 * hv + r0,
					  len, scale, lane, bars + B_FDO * 8, i & 1);
			kt_bar_sync(1, 128 * CONS);	/* A */
			if (!live) {
				/* reads no do, but waits for it: every thread waits each
				 * full phase before its empty arrival */
				if (EARLY_REFILL)
					kt_mbar_wait(bars + B_FDO * 8, i & 1);
				zero_half(gscr + hv * HTILE, ctid & 127);
				zero_half(gscr + (2 + hv) * HTILE, ctid & 127);
				continue;
			}
			put_half(scr + hv * HTILE, pa, r0, lane);

			/* dQ = dS k; dS goes to the scratch meanwhile */
			zero_acc<true>(acc[0]);
			kt_wg_fence();
#pragma unroll
			for (int kk = 0; kk < BLK / 16; kk++)
				kt_wg<HD>::rs<1>(acc[0], a[kk], kt_wg_desc_mn(sk + kk * 2048, PANEL));
			kt_wg_commit();
			put_half(scr + (2 + hv) * HTILE, a, r0, lane);
			kt_wg_wait<0>();
			kt_wg_pin(acc[0]);
			put_out<CROT>(dq, acc, table, ct, r0 + 64 * hv, 0, b.x, len, H, h, lane);
		}
		/* every half's P and dS before dV, dK */
		kt_fence_proxy_async();
		kt_bar_sync(1, 128 * CONS);	/* B */
		if (EARLY_REFILL)	/* k, v free: every consumer's dQ is done */
			kt_mbar_arrive(bars + B_EKV * 8);

		/* this consumer's key tiles within the length (warpgroup-uniform) */
		const int nmt = (len - 64 * cw + 64 * CONS - 1) / (64 * CONS);

#if EARLY_REFILL
		/* dV = P^T do, then dK = dS^T q, per key tile: do is free after
		 * this thread's last dV, q's buffer after its last dK (both at
		 * once, with no key tile); dV first, because the next item's q
		 * is already in the other buffer and its do waits for this one */
		const unsigned qempty = bars + ((i & 1) ? B_EQ1 : STAGES + slot) * 8;

		if (nmt == 0) {
			kt_mbar_arrive(qempty);
			kt_mbar_arrive(bars + B_EDO * 8);
		}
#pragma unroll 1
		for (int j = 0; j < nmt; j++) {
			const int mt = cw + CONS * j;

			zero_acc<true>(acc[0]);
			kt_wg_fence();
			mma_tt2(acc[0], scr, scr + HTILE, sdo, mt);
			kt_wg_commit();
			kt_wg_wait<0>();
			kt_wg_pin(acc[0]);
			if (j == nmt - 1)
				kt_mbar_arrive(bars + B_EDO * 8);
			put_out<ROPE_V>(dv, acc, table, ct, r0 + 64 * mt, 0, b.x, len, H, h, lane);
		}
#pragma unroll 1
		for (int j = 0; j < nmt; j++) {
			const int mt = cw + CONS * j;

			zero_acc<true>(acc[0]);
			kt_wg_fence();
			mma_tt2(acc[0], scr + 2 * HTILE, scr + 3 * HTILE, sq, mt);
			kt_wg_commit();
			kt_wg_wait<0>();
			kt_wg_pin(acc[0]);
			if (j == nmt - 1)
				kt_mbar_arrive(qempty);
			put_out<CROT>(dk, acc, table, ct, r0 + 64 * mt, 0, b.x, len, H, h, lane);
		}
#else
		/* dV = P^T do, per key tile */
#pragma unroll 1
		for (int j = 0; j < nmt; j++) {
			const int mt = cw + CONS * j;

			zero_acc<true>(acc[0]);
			kt_wg_fence();
			mma_tt2(acc[0], scr, scr + HTILE, sdo, mt);
			kt_wg_commit();
			kt_wg_wait<0>();
			kt_wg_pin(acc[0]);
			/* ROPE 2: dv conjugate-rotated here, also under RPROD 3 */
			put_out<ROPE_V>(dv, acc, table, ct, r0 + 64 * mt, 0, b.x, len, H, h, lane);
		}
		/* dK = dS^T q, per key tile; this thread is done with the slot
		 * after the last (or at once, with no key tile) */
		if (RPROD != 3 && nmt == 0)
			kt_mbar_arrive(bars + (STAGES + slot) * 8);
#pragma unroll 1
		for (int j = 0; j < nmt; j++) {
			const int mt = cw + CONS * j;

			zero_acc<true>(acc[0]);
			kt_wg_fence();
			mma_tt2(acc[0], scr + 2 * HTILE, scr + 3 * HTILE, sq, mt);
			kt_wg_commit();
			kt_wg_wait<0>();
			kt_wg_pin(acc[0]);
			if (RPROD != 3 && j == nmt - 1)
				kt_mbar_arrive(bars + (STAGES + slot) * 8);
			put_out<CROT>(dk, acc, table, ct, r0 + 64 * mt, 0, b.x, len, H, h, lane);
		}
		if (RPROD == 3)	/* free, and dq, dk written for the producer to rotate */
			kt_mbar_arrive(bars + (STAGES + slot) * 8);
#endif
	}
#elif BLK == 128
	/* this consumer's scratch (half 0's P, then dS), after the barriers */
	const unsigned scr = bars + 1024 + cw * 2 * HTILE;

	/* Items cw, cw + CONS, ...; per item the two m64 row halves one after
	 * the other (half 1 only with rows within the length), then dV and dK
	 * as m64 key tiles over both halves. Each P-half write follows a
	 * barrier of the warpgroup, so that no warp overwrites what another
	 * warp's wgmma may still read: the scratch (the previous item's dV, dK
	 * read it; every warp waited for those before this item's S, dP), v
	 * (dP of half 1), k (dQ of half 1). */
	for (int i = cw;; i += CONS) {
		citem it;

		if (!take(i, smem, sbase, bars, blocks, nitems, H, cta_step, item_step, nper, it))
			break;

		const int2 b = it.b;
		const int h = it.h, len = it.len, slot = it.slot;
		const unsigned sq = it.sq, sk = sq + TILE, sv = sq + 2 * TILE, sdo = sq + 3 * TILE;
		const bool two = len > 64;	/* half 1 (and key tile 1) within the length */
		float acc[MI][ND][4];

#pragma unroll
		for (int hv = 0; hv < HALVES; hv++) {
			/* P and dS of the half's 64 query rows, bf16 in the A
			 * fragments' layout (a_from_acc) */
			unsigned pa[BLK / 16][4], a[BLK / 16][4];

			if (hv && !two)
				break;
			half_p_ds(pa, a, sq + hv * HROWS, sk, sv, sdo + hv * HROWS, 64 * hv + r0, len,
				  scale, lane);
			/* every warp's S and dP are done: P to the scratch (half 0)
			 * or the dead v tile (half 1) */
			kt_bar_sync(1 + cw, 128);
			put_half(hv ? sv : scr, pa, r0, lane);

			/* dQ = dS k; half 0's dS goes to the scratch meanwhile */
			zero_acc<true>(acc[0]);
			kt_wg_fence();
#pragma unroll
			for (int kk = 0; kk < BLK / 16; kk++)
				kt_wg<HD>::rs<1>(acc[0], a[kk], kt_wg_desc_mn(sk + kk * 2048, PANEL));
			kt_wg_commit();
			if (!hv)
				put_half(scr + HTILE, a, r0, lane);
			kt_wg_wait<0>();
			kt_wg_pin(acc[0]);
			put_out<CROT>(dq, acc, table, ct, r0 + 64 * hv, 0, b.x, len, H, h, lane);
			if (hv) {	/* every warp's dQ is done: k is dead, dS there */
				kt_bar_sync(1 + cw, 128);
				put_half(sk, a, r0, lane);
			}
		}
		/* every warp's P and dS halves before dV, dK */
		kt_fence_proxy_async();
		kt_bar_sync(1 + cw, 128);

		/* dV = P^T do, per key tile */
#pragma unroll 1
		for (int mt = 0; mt < 1 + two; mt++) {
			zero_acc<true>(acc[0]);
			kt_wg_fence();
			mma_tt2(acc[0], scr, sv, sdo, mt);
			kt_wg_commit();
			kt_wg_wait<0>();
			kt_wg_pin(acc[0]);
			/* ROPE 2: dv conjugate-rotated here, also under RPROD 3 */
			put_out<ROPE_V, false>(dv, acc, table, ct, r0 + 64 * mt, 0, b.x, len, H, h,
					       lane);
		}
		/* dK = dS^T q, per key tile; the slot is free after the last */
#pragma unroll 1
		for (int mt = 0; mt < 1 + two; mt++) {
			zero_acc<true>(acc[0]);
			kt_wg_fence();
			mma_tt2(acc[0], scr + HTILE, sk, sq, mt);
			kt_wg_commit();
			kt_wg_wait<0>();
			kt_wg_pin(acc[0]);
			if (RPROD != 3 && mt == two)
				kt_mbar_arrive(bars + (STAGES + slot) * 8);
			put_out<CROT>(dk, acc, table, ct, r0 + 64 * mt, 0, b.x, len, H, h, lane);
		}
		if (RPROD == 3)	/* free, and dq, dk written for the producer to rotate */
			kt_mbar_arrive(bars + (STAGES + slot) * 8);
	}
#else
	for (int i = cw;; i += CONS) {
		citem it;

		if (!take(i, smem, sbase, bars, blocks, nitems, H, cta_step, item_step, nper, it))
			break;

		const int2 b = it.b;
		const int h = it.h, len = it.len, slot = it.slot;
		const unsigned sq = it.sq, sk = sq + TILE, sv = sq + 2 * TILE, sdo = sq + 3 * TILE;
		unsigned char *gq = it.gq;
		float s[MI][NB][4], dp[MI][NB][4], inv[MI][2], acc[MI][ND][4];

		/* S = q k^T, dP = do v^T */
		zero_acc<HD == 128>(s[0]);
		zero_acc<HD == 128>(dp[0]);
		kt_wg_fence();
		mma_s(s[0], sq, sk);
		mma_s(dp[0], sdo, sv);
		kt_wg_commit();
		kt_wg_wait<0>();
		kt_wg_pin(s[0]);
		kt_wg_pin(dp[0]);

		softmax_rows(s, inv, len, lane);
#pragma unroll
		for (int hf = 0; hf < 2; hf++) {
			int row = r0 + (lane >> 2) + 8 * hf;
			float norm = row < len ? inv[0][hf] : 0.f, di = 0.f;

#pragma unroll
			for (int nt = 0; nt < NB; nt++)
#pragma unroll
				for (int e = 0; e < 2; e++) {
					float p = s[0][nt][2 * hf + e] * norm;

					s[0][nt][2 * hf + e] = p;
					di += p * dp[0][nt][2 * hf + e];
				}
			di += __shfl_xor_sync(0xffffffffu, di, 1);
			di += __shfl_xor_sync(0xffffffffu, di, 2);
#pragma unroll
			for (int nt = 0; nt < NB; nt++)
#pragma unroll
				for (int e = 0; e < 2; e++)
					dp[0][nt][2 * hf + e] =
						s[0][nt][2 * hf + e] * (dp[0][nt][2 * hf + e] - di) * scale;
		}
		/* v is dead (the waited wgmmas were its last readers): P there */
		put_pan(gq + 2 * TILE, s[0], r0, lane);

		/* dQ = dS k */
		kt_wg_zero(acc[0]);
		mma_rx(acc[0], dp[0], sk);
		kt_wg_commit();
		kt_wg_wait<0>();
		kt_wg_pin(acc[0]);
		/* k is dead now: dS there; every warp's P and dS before dV, dK */
		put_pan(gq + TILE, dp[0], r0, lane);
		kt_fence_proxy_async();
		kt_bar_sync(1 + cw, 128);
		put_out<CROT>(dq, acc, table, ct, r0, 0, b.x, len, H, h, lane);

		/* dV = P^T do */
		kt_wg_zero(acc[0]);
		kt_wg_fence();
		mma_tt(acc[0], sv, sdo);
		kt_wg_commit();
		kt_wg_wait<0>();
		kt_wg_pin(acc[0]);
		/* ROPE 2: dv conjugate-rotated here, also under RPROD 3 */
		put_out<ROPE_V>(dv, acc, table, ct, r0, 0, b.x, len, H, h, lane);

		/* dK = dS^T q */
		kt_wg_zero(acc[0]);
		kt_wg_fence();
		mma_tt(acc[0], sk, sq);
		kt_wg_commit();
		kt_wg_wait<0>();
		kt_wg_pin(acc[0]);
		if (RPROD != 3)	/* the slot is free */
			kt_mbar_arrive(bars + (STAGES + slot) * 8);
		put_out<CROT>(dk, acc, table, ct, r0, 0, b.x, len, H, h, lane);
		if (RPROD == 3)	/* free, and dq, dk written for the producer to rotate */
			kt_mbar_arrive(bars + (STAGES + slot) * 8);
	}
#endif
}
#elif BLK == 256
extern "C" __global__ void __launch_bounds__((CONS + 1) * 128, 1)
blockattn_fwd_ws(const __nv_bfloat16 *__restrict__ q, const __nv_bfloat16 *__restrict__ k,
		 const __nv_bfloat16 *__restrict__ v, const int2 *__restrict__ blocks,
		 const __nv_bfloat16 *__restrict__ table, __nv_bfloat16 *__restrict__ o, int nitems, int H,
		 int cta_step, int item_step, int nper)
{
	using namespace kws;
	extern __shared__ __align__(1024) unsigned char smem[];
	const unsigned sbase = kt_smem_u32(smem);
	const unsigned bars = sbase + RINGS;
	const int tid = threadIdx.x, wgi = tid >> 7;

	if (tid == 0) {
		for (int b = 0; b < NBARS; b++)
			kt_mbar_init(bars + b * 8,
				     (b >= B_QE && b < B_KF) || b >= B_KE ? 128 * CONS : PT);
		kt_mbar_init_fence();
	}
	__syncthreads();
#if BOUND
	nitems = kba::bound_items(blocks, nitems, H);
#endif
	if (wgi == 0) {
		producer256(smem, sbase, bars, q, k, v, blocks, table, nitems, H, cta_step,
			    item_step, nper, tid);
		return;
	}

	const int cw = wgi - 1, lane = tid & 31, r0 = ((tid >> 5) & 3) * 16;
	unsigned ct[MI][2][ND];	/* unused (no rotation of O) */
	int gq = 0, gk = 0;

	/* every step of the producer's sequence, in its order */
	for (int i = 0;; i++) {
		const int w = item_at(i, nitems, cta_step, item_step, nper);

		if (w < 0)
			break;

		const int2 b = blocks[w / H];
		const int h = w % H, len = b.y;
		const int nr = ((len + 63) / 64 + CONS - 1) / CONS, nc = (len + KC - 1) / KC;

#pragma unroll 1
		for (int r = 0; r < nr; r++, gq++) {
			/* this consumer's row tile; past the length it only
			 * waits and releases (warpgroup-uniform) */
			const int rt = r * CONS + cw;
			const bool act = 64 * rt < len;
			const int qs = gq % QSLOTS;
			const unsigned sq = sbase + qs * QSLOT + cw * HROWS;
			float acc[MI][ND][4], m[2], l[2];

			kt_mbar_wait(bars + (B_QF + qs) * 8, (gq / QSLOTS) & 1);
			kt_fence_proxy_async();
			kt_wg_zero(acc[0]);
			m[0] = m[1] = KBA_NEG_INF;
			l[0] = l[1] = 0.f;
#pragma unroll 1
			for (int c = 0; c < nc; c++, gk++) {
				const int ks = gk % STAGES;
				const unsigned sk = sbase + QSLOTS * QSLOT + ks * KSLOT;

				kt_mbar_wait(bars + (B_KF + ks) * 8, (gk / STAGES) & 1);
				kt_fence_proxy_async();
				if (act)
					attend_kc(acc[0], m, l, sq, sk, sk + KC * HD * 2, c * KC, len,
						  lane);
				kt_mbar_arrive(bars + (B_KE + ks) * 8);
			}
			kt_mbar_arrive(bars + (B_QE + qs) * 8);
			if (!act)
				continue;
#pragma unroll
			for (int hf = 0; hf < 2; hf++) {
				float x = l[hf];

				x += __shfl_xor_sync(0xffffffffu, x, 1);
				x += __shfl_xor_sync(0xffffffffu, x, 2);
				x = 1.f / x;
#pragma unroll
				for (int nt = 0; nt < ND; nt++) {
					acc[0][nt][2 * hf] *= x;
					acc[0][nt][2 * hf + 1] *= x;
				}
			}
			put_out<false>(o, acc, table, ct, 64 * rt + r0, 0, b.x, len, H, h, lane);
		}
	}
}
#else
extern "C" __global__ void __launch_bounds__((CONS + 1) * 128, 1)
blockattn_fwd_ws(const __nv_bfloat16 *__restrict__ q, const __nv_bfloat16 *__restrict__ k,
		 const __nv_bfloat16 *__restrict__ v, const int2 *__restrict__ blocks,
		 const __nv_bfloat16 *__restrict__ table, __nv_bfloat16 *__restrict__ o, int nitems, int H,
		 int cta_step, int item_step, int nper)
{
	KWS_BODY_BEGIN
#if BOUND
	nitems = kba::bound_items(blocks, nitems, H);
#endif
	if (wgi == 0) {
		producer(smem, sbase, bars, q, k, v, nullptr, blocks, table, nullptr, nullptr, nitems,
			 H, cta_step, item_step, nper, tid);
		return;
	}

	const int cw = wgi - 1, lane = tid & 31, r0 = ((tid >> 5) & 3) * 16;
	unsigned ct[MI][2][ND];	/* unused (no rotation of O) */

	/* SHARE 1: items cw, cw + CONS, ...; SHARE CONS (BLK 128): every item */
	for (int i = cw / SHARE;; i += CONS / SHARE) {
		citem it;

		if (!take(i, smem, sbase, bars, blocks, nitems, H, cta_step, item_step, nper, it))
			break;

		const int2 b = it.b;
		const int h = it.h, len = it.len, slot = it.slot;
		const unsigned sq = it.sq, sk = sq + TILE, sv = sq + 2 * TILE;

		/* this consumer's halves (BLK 64: the one); the slot is released
		 * after the last one that has rows within the length */
		for (int hv = cw % SHARE;; hv += SHARE) {
			const bool last = hv + SHARE >= HALVES || 64 * (hv + SHARE) >= len;
			float s[MI][NB][4], inv[MI][2], acc[MI][ND][4];

			if (HALVES > 1 && 64 * hv >= len) {	/* SHARE 2, a short block */
				kt_mbar_arrive(bars + (STAGES + slot) * 8);
				break;
			}
			kt_wg_zero(s[0]);
			kt_wg_fence();
			mma_s(s[0], sq + hv * HROWS, sk);
			kt_wg_commit();
			kt_wg_wait<0>();
			kt_wg_pin(s[0]);
			softmax_rows(s, inv, len, lane);

			kt_wg_zero(acc[0]);
			mma_rx(acc[0], s[0], sv);
			kt_wg_commit();
			kt_wg_wait<0>();
			kt_wg_pin(acc[0]);
			if (last)	/* the slot is free */
				kt_mbar_arrive(bars + (STAGES + slot) * 8);
#pragma unroll
			for (int nt = 0; nt < ND; nt++)
#pragma unroll
				for (int e = 0; e < 4; e++)
					acc[0][nt][e] *= inv[0][e >> 1];
			put_out<false>(o, acc, table, ct, r0 + 64 * hv, 0, b.x, len, H, h, lane);
			if (last)
				break;
		}
	}
}
#endif
