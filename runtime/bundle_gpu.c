/*
 * check_gpu.c -- `make check-gpu` of a ktune export bundle (written there
 * from ktune's runtime/bundle_gpu.c; needs a GPU and the CUDA runtime):
 * every entry of the table run on the GPU from the bundle's own cubins
 * (option nvrtc 0: nothing may be compiled), twice, every output written
 * and finite (said when the two runs differ in their last bits). Numbers against the references are libktune's test
 * suite's (tests/test_runtime.c); this checks that nvcc's cubins load,
 * their renamed kernels resolve and run.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime.h>

#include "ktune_tuned.h"

#define MAXB 10

static float bf16_f32(unsigned short h)
{
	unsigned u = (unsigned)h << 16;
	float f;

	memcpy(&f, &u, 4);
	return f;
}

/* The value of key in a shape key ("tokens=777,..."), or -1. */
static long long key_val(const char *shape, const char *key)
{
	size_t n = strlen(key);
	const char *p = shape;

	while ((p = strstr(p, key))) {
		if ((p == shape || p[-1] == ',') && p[n] == '=')
			return atoll(p + n + 1);
		p += n;
	}
	return -1;
}

int main(void)
{
	ktune_table *t = NULL;
	int i, bad = 0, rc;

	/* a line per entry as it finishes, also into a file: the big entries
	 * take seconds each and a killed run should still say how far it got */
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (cudaFree(0) != cudaSuccess) {
		fprintf(stderr, "check-gpu: no GPU\n");
		return 1;
	}
	if ((rc = ktune_open_tuned(&t)) != KTUNE_OK || ktune_set_option(t, "nvrtc", "0") != KTUNE_OK) {
		fprintf(stderr, "%s\n", ktune_last_error());
		return 1;
	}
	for (i = 0; i < ktune_tuned.nentries; i++) {
		const struct ktune_builtin_entry *e = &ktune_tuned.entries[i];
		const char *f = e->family;
		long long T, sz[MAXB], n = 0, k, B;
		int nout = 1, attn = !strncmp(f, "blockattn", 9), bwd = !strcmp(f, "blockattn_bwd");
		void *buf[MAXB + 1] = { NULL }, *ws = NULL, *prep = NULL;
		int64_t wsb = 0, prepb = 0;
		ktune_choice c;
		double sum[2] = { 0, 0 };
		int nonfinite = 0, run;

		ktune_set_option(t, "device", ktune_tuned.devices[e->device].name);
		if ((rc = ktune_choose(t, f, e->shape, NULL, &c)) != KTUNE_OK) {
			fprintf(stderr, "entry %d %s %s: %s\n", i, f, e->shape, ktune_last_error());
			bad++;
			continue;
		}
		T = attn ? key_val(c.shape, "tokens") : key_val(e->shape, "tokens");
		if (attn) {
			long long x = T * key_val(e->shape, "heads") * key_val(e->shape, "head_dim");

			B = key_val(e->shape, "seqs");
			for (k = 0; k < (bwd ? 4 : 3); k++)
				sz[n++] = x * 2;
			sz[n++] = (B + 1) * 4;
			if (key_val(e->shape, "rope"))
				sz[n++] = T * key_val(e->shape, "head_dim") * 2;
			nout = bwd ? 3 : 1;
			for (k = 0; k < nout; k++)
				sz[n++] = x * 2;
		} else {
			long long in = key_val(e->shape, "in"), out = key_val(e->shape, "out");
			long long r = key_val(e->shape, "rank"), b = key_val(e->shape, "blocks");

			sz[n++] = T * in * 2;
			if (!strcmp(f, "dense")) {
				sz[n++] = out * in * 2;
			} else if (!strcmp(f, "lowrank")) {
				sz[n++] = r * in * 2;
				sz[n++] = out * r * 2;
			} else if (!strncmp(f, "monarch", 7)) {
				sz[n++] = r * in * 2;
				sz[n++] = out * r * 2;
				ktune_monarch_prepared_size(t, in, out, b, r, &prepb);
			} else {	/* blast: U, V, S */
				sz[n++] = out * r * 2;
				sz[n++] = r * in * 2;
				sz[n++] = b * b * r * 2;
				ktune_blast_prepared_size(t, in, out, b, r, &prepb);
			}
			sz[n++] = T * out * 2;
		}
		for (k = 0; k < n; k++) {
			unsigned short *h = malloc((size_t)sz[k]);
			long long j;

			cudaMalloc(&buf[k], (size_t)sz[k]);
			for (j = 0; h && j < sz[k] / 2; j++)	/* small values, never all zero */
				h[j] = (unsigned short)(0x3c00 + ((j * 2654435761u + k) % 256));
			if (attn && k == (bwd ? 4 : 3)) {	/* cu_seqlens: T over B sequences */
				int *o = (int *)h;

				for (j = 0; j <= B; j++)
					o[j] = (int)(j * T / B);
			}
			if (h)
				cudaMemcpy(buf[k], h, (size_t)sz[k], cudaMemcpyHostToDevice);
			free(h);
		}
		wsb = c.workspace_bytes;
		if (wsb)
			cudaMalloc(&ws, (size_t)wsb);
		if (prepb) {
			long long in = key_val(e->shape, "in"), out = key_val(e->shape, "out");
			long long r = key_val(e->shape, "rank"), b = key_val(e->shape, "blocks");

			cudaMalloc(&prep, (size_t)prepb);
			rc = !strncmp(f, "monarch", 7)
				     ? ktune_monarch_prepare(t, buf[1], buf[2], prep, prepb, in, out, b, r, NULL)
				     : ktune_blast_prepare(t, buf[1], buf[2], buf[3], prep, prepb, in, out, b, r,
							   NULL);
			if (rc != KTUNE_OK)
				fprintf(stderr, "entry %d prepare: %s\n", i, ktune_last_error());
			buf[n] = prep;
		}
		for (run = 0; run < 2 && rc == KTUNE_OK; run++) {
			for (k = n - nout; k < n; k++)
				cudaMemset(buf[k], 0xff, (size_t)sz[k]);	/* NaN */
			rc = ktune_run(t, f, e->shape, buf, (int32_t)(n + (prepb ? 1 : 0)), ws, wsb, NULL);
			if (rc != KTUNE_OK || cudaDeviceSynchronize() != cudaSuccess) {
				fprintf(stderr, "entry %d %s %s: %s %s\n", i, f, e->shape, ktune_last_error(),
					cudaGetErrorString(cudaGetLastError()));
				rc = rc ? rc : -1;
				break;
			}
			for (k = n - nout; k < n; k++) {
				unsigned short *h = malloc((size_t)sz[k]);
				long long j;

				cudaMemcpy(h, buf[k], (size_t)sz[k], cudaMemcpyDeviceToHost);
				for (j = 0; h && j < sz[k] / 2; j++) {
					float v = bf16_f32(h[j]);

					if (isfinite(v))
						sum[run] += v;
					else
						nonfinite++;
				}
				free(h);
			}
		}
		if (rc != KTUNE_OK || nonfinite) {
			fprintf(stderr, "entry %d %s %s: FAILED (%d non-finite, sums %g %g)\n", i, f,
				e->shape, nonfinite, sum[0], sum[1]);
			bad++;
		} else {
			printf("entry %d: %s %s ran from %s cubins (%s)%s\n", i, f, e->shape,
			       c.shipped ? "the bundle's" : "NOT only the bundle's", c.config,
			       sum[0] == sum[1] ? "" : ", runs not bitwise equal");
			bad += !c.shipped;
		}
		for (k = 0; k < n; k++)
			cudaFree(buf[k]);
		cudaFree(ws);
		cudaFree(prep);
	}
	printf("%d of %d entries ran on the GPU from the bundle's cubins\n",
	       (int)ktune_tuned.nentries - bad, (int)ktune_tuned.nentries);
	ktune_close(t);
	return bad != 0;
}
