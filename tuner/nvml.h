/*
 * nvml.h -- what a GPU is doing (SM and memory clocks, board power,
 * temperature), read through NVML in the worker child.
 *
 * libnvidia-ml.so.1 is dlopen'ed (KTUNE_NVML_LIB names another file, for
 * tests; KTUNE_NVML=0 turns NVML off), so that ktune starts where it is
 * absent: nvml_open() then fails with a reason and the caller records no
 * conditions. The device is found by its UUID ("GPU-..."), which is the
 * same under any CUDA_VISIBLE_DEVICES. A struct nvml is used by one thread.
 */
#ifndef KT_NVML_H
#define KT_NVML_H

#include <stddef.h>

/* One reading; a field is 0 when NVML could not give it. */
struct nvml_sample {
	int sm_mhz, mem_mhz;
	double power_w;
	int temp_c;
};

struct nvml;

/* 0 with *out set; -1 with why (NVML absent, no device with that UUID). */
int nvml_open(const char *uuid, struct nvml **out, char *why, size_t whylen);
/* Reads every field it can; 0 when at least the SM clock was read. */
int nvml_read(struct nvml *n, struct nvml_sample *s);
void nvml_close(struct nvml *n);	/* NULL ok */

#endif
