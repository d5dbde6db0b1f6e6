#include "suite.h"

#include <string.h>

const struct suite_workload suite_dev[] = {
	{ "dense:4096x4096:N1024", "dense", "tokens=1024,in=4096,out=4096", "cublas_dense" },
	{ "lowrank:llama7b_qkvo:N1024", "lowrank", "tokens=1024,in=4096,out=4096,rank=1024",
	  "cublas_dense,torch_naive" },
	{ "monarch:llama7b_qkvo:N1024", "monarch", "tokens=1024,in=4096,out=4096,blocks=16,rank=1024",
	  "cublas_dense,torch_naive,torch_compile" },
	{ "blast:llama7b_qkvo:N1024", "blast", "tokens=1024,in=4096,out=4096,blocks=16,rank=1024",
	  "cublas_dense,torch_naive,torch_compile" },
	{ "blast:llama7b_qkvo:N16384", "blast", "tokens=16384,in=4096,out=4096,blocks=16,rank=1024",
	  "cublas_dense,torch_naive,torch_compile" },
	{ "blast:llama1b_qo:N1024", "blast", "tokens=1024,in=2048,out=2048,blocks=16,rank=256",
	  "cublas_dense,torch_naive,torch_compile" },
	/* Jagged block attention, the ads setting: B 1152, H 4, d 128, BLK 64,
	 * lengths from kernels/blockattn.h's generator (bench/peers_attn.py
	 * reproduces them for FA2). */
	{ "blockattn_fwd:ads_d128_L256", "blockattn_fwd",
	  "seqs=1152,lmax=256,heads=4,head_dim=128,block=64,rope=0", "fa2_varlen" },
	{ "blockattn_bwd:ads_d128_L256", "blockattn_bwd",
	  "seqs=1152,lmax=256,heads=4,head_dim=128,block=64,rope=0", "fa2_varlen" },
	{ "blockattn_bwd_rope:ads_d128_L256", "blockattn_bwd",
	  "seqs=1152,lmax=256,heads=4,head_dim=128,block=64,rope=1", "unfused_rope" },
	{ "blockattn_fwd:ads_d128_L1024", "blockattn_fwd",
	  "seqs=1152,lmax=1024,heads=4,head_dim=128,block=64,rope=0", "fa2_varlen" },
	{ "blockattn_bwd:ads_d128_L1024", "blockattn_bwd",
	  "seqs=1152,lmax=1024,heads=4,head_dim=128,block=64,rope=0", "fa2_varlen" },
	{ "blockattn_fwd:ads_d128_L256_b128", "blockattn_fwd",
	  "seqs=1152,lmax=256,heads=4,head_dim=128,block=128,rope=0", "fa2_varlen" },
	{ "blockattn_bwd:ads_d128_L256_b128", "blockattn_bwd",
	  "seqs=1152,lmax=256,heads=4,head_dim=128,block=128,rope=0", "fa2_varlen" },
	{ NULL, NULL, NULL, NULL },
};

const struct suite_workload *suite_find(const char *id)
{
	const struct suite_workload *w;

	for (w = suite_dev; id && w->id; w++)
		if (strcmp(w->id, id) == 0)
			return w;
	return NULL;
}
