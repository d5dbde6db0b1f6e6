/*
 * blockattn.h -- jagged block-diagonal attention (families blockattn_fwd and
 * blockattn_bwd, kernels/blockattn.c): the problem generator and the CPU
 * references, exposed so that tests and tools rebuild exactly what the
 * worker runs.
 *
 * A problem is B sequences packed along T tokens: q, k, v (T, H, d) bf16,
 * offsets (B+1) int32. Each sequence is cut into blocks of BLK tokens (the
 * last one may be partial); a token attends to the keys of its own block
 * (same head), non-causal, scale 1/sqrt(d). With rope, q and k are raw
 * (unrotated) and a table (T, d) bf16 holds cos/sin interleaved by pair:
 * table[t][2i] = cos(p * theta_i), table[t][2i+1] = sin(p * theta_i), p the
 * position of token t within its sequence, theta_i = 10000^(-2i/d).
 * rope=2 rotates v as well (its rows by their own positions, like k's):
 * o = softmax(rot(q) rot(k)^T / sqrt(d)) rot(v), and the backward returns
 * the gradients of the raw q, k and v.
 *
 * Shape keys: seqs (B), lmax, heads (H), head_dim (d), block (BLK), rope.
 * The lengths are not a key: they are a pure function of (seqs, lmax),
 * drawn from the standard SplitMix64 sequence seeded 0 (ba_lengths), so
 * every host (and bench/peers_attn.py) builds the same offsets: a
 * generator written in C and Python alike is what lets the peers run
 * exactly ktune's problem. T is derived (ba_tokens).
 *
 * Pure functions over plain data, like family.h; the CPU references use
 * double throughout and return -1 only when out of memory.
 */
#ifndef KT_BLOCKATTN_H
#define KT_BLOCKATTN_H

#include <stddef.h>
#include <stdint.h>

#include "family.h"

/* Shape dims, in schema order (the same for both families). */
enum { BA_D_SEQS, BA_D_LMAX, BA_D_HEADS, BA_D_HDIM, BA_D_BLOCK, BA_D_ROPE, BA_NDIMS };

/* Density of the lengths: uniform in [max(1, floor(2*lmax/5)), lmax], the
 * integer form of [(2*rho - 1) * lmax, lmax] with rho = 0.7. */
long ba_len_min(long lmax);
/* Length of sequence i: lo + splitmix64_i mod (lmax - lo + 1), where
 * splitmix64_i is the i-th output (i from 0) of SplitMix64 seeded 0. */
long ba_length(long lmax, long i);
/* offsets[0..B] (B + 1 entries) of a shape. */
void ba_offsets(long seqs, long lmax, int32_t *offsets);
/* T and the number of BLK-blocks of (seqs, lmax), without allocating. */
long ba_tokens(long seqs, long lmax);
long ba_blocks(long seqs, long lmax, long blk);
/* The rope table (T, d) for offsets: bf16 (uint16_t, rounded to nearest
 * even from the double cos / sin), (cos, sin) of pair i at 2i, 2i + 1. */
void ba_rope_table(const int32_t *offsets, long seqs, long d, uint16_t *table);

/* One jagged problem for the CPU references. */
struct ba_dims {
	long seqs, heads, d, blk;
	long tokens;		/* offsets[seqs] */
	const int32_t *offsets;
};

/* o = blockattn(q, k, v); with table non-NULL q, k are raw and rotated
 * first, and so is v when rot_v (rope=2). Arrays (T, H, d). */
int ba_cpu_fwd(const struct ba_dims *p, const double *q, const double *k, const double *v,
	       const double *table, int rot_v, double *o);
/* Gradients of sum(o * dout) w.r.t. q, k, v (the raw q, k when table is
 * non-NULL, the raw v too when rot_v). */
int ba_cpu_bwd(const struct ba_dims *p, const double *q, const double *k, const double *v,
	       const double *dout, const double *table, int rot_v, double *dq, double *dk,
	       double *dv);
/* x (T, H, d) rotated in place by the table; conj: the inverse rotation
 * (dx0 = dy0 c + dy1 s, dx1 = dy1 c - dy0 s), which is also the transpose,
 * so it maps gradients of rotated inputs to gradients of raw ones. */
void ba_rotate(const struct ba_dims *p, const double *table, double *x, int conj);

extern const struct kt_family blockattn_fwd_family;
extern const struct kt_family blockattn_bwd_family;

#endif
