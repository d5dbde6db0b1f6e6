/*
 * nvml.c -- NVML by dlopen (see nvml.h). Only the few entry points ktune
 * reads are declared, with NVML's documented signatures; NVML's header is
 * not needed to build.
 */
#include "nvml.h"
#include "../util/knobs.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvml_ret;		/* nvmlReturn_t: 0 is NVML_SUCCESS */
typedef struct nvml_dev *nvml_dev;	/* nvmlDevice_t */

enum { NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2 };	/* nvmlClockType_t */
enum { NVML_TEMPERATURE_GPU = 0 };		/* nvmlTemperatureSensors_t */

struct nvml {
	void *lib;
	nvml_dev dev;
	nvml_ret (*shutdown)(void);
	nvml_ret (*clock)(nvml_dev, int, unsigned *);
	nvml_ret (*power)(nvml_dev, unsigned *);	/* milliwatts */
	nvml_ret (*temp)(nvml_dev, int, unsigned *);
};

static void *sym(void *lib, const char *name)
{
	return dlsym(lib, name);
}

int nvml_open(const char *uuid, struct nvml **out, char *why, size_t whylen)
{
	const char *path = kt_knob_test_hook(KT_KNOB_NVML_LIB);
	nvml_ret (*init)(void) = NULL;
	nvml_ret (*by_uuid)(const char *, nvml_dev *) = NULL;
	struct nvml *n = NULL;
	void *p;
	nvml_ret r;

	*out = NULL;
	if (!kt_knob_flag(KT_KNOB_NVML)) {
		snprintf(why, whylen, "NVML turned off (KTUNE_NVML=0)");
		return -1;
	}
	if (!uuid || !*uuid) {
		snprintf(why, whylen, "no device UUID");
		return -1;
	}
	if (!(n = calloc(1, sizeof(*n)))) {
		snprintf(why, whylen, "out of memory");
		return -1;
	}
	if (!path || !*path)
		path = "libnvidia-ml.so.1";
	if (!(n->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL))) {
		snprintf(why, whylen, "no NVML (%s not found)", path);
		goto fail;
	}
	/* Function pointers out of dlsym's void *, as POSIX allows. */
	if ((p = sym(n->lib, "nvmlInit_v2")))
		memcpy(&init, &p, sizeof(p));
	if ((p = sym(n->lib, "nvmlShutdown")))
		memcpy(&n->shutdown, &p, sizeof(p));
	if ((p = sym(n->lib, "nvmlDeviceGetHandleByUUID")))
		memcpy(&by_uuid, &p, sizeof(p));
	if ((p = sym(n->lib, "nvmlDeviceGetClockInfo")))
		memcpy(&n->clock, &p, sizeof(p));
	if ((p = sym(n->lib, "nvmlDeviceGetPowerUsage")))
		memcpy(&n->power, &p, sizeof(p));
	if ((p = sym(n->lib, "nvmlDeviceGetTemperature")))
		memcpy(&n->temp, &p, sizeof(p));
	if (!init || !n->shutdown || !by_uuid || !n->clock) {
		snprintf(why, whylen, "%s lacks an entry point ktune needs", path);
		goto fail;
	}
	if ((r = init()) != 0) {
		snprintf(why, whylen, "nvmlInit failed (%d)", r);
		goto fail;
	}
	if ((r = by_uuid(uuid, &n->dev)) != 0) {
		snprintf(why, whylen, "NVML has no device %s (%d)", uuid, r);
		n->shutdown();
		goto fail;
	}
	*out = n;
	return 0;
fail:
	if (n->lib)
		dlclose(n->lib);
	free(n);
	return -1;
}

int nvml_read(struct nvml *n, struct nvml_sample *s)
{
	unsigned v;

	memset(s, 0, sizeof(*s));
	if (!n)
		return -1;
	if (n->clock(n->dev, NVML_CLOCK_SM, &v) == 0)
		s->sm_mhz = (int)v;
	if (n->clock(n->dev, NVML_CLOCK_MEM, &v) == 0)
		s->mem_mhz = (int)v;
	if (n->power && n->power(n->dev, &v) == 0)
		s->power_w = v / 1000.0;
	if (n->temp && n->temp(n->dev, NVML_TEMPERATURE_GPU, &v) == 0)
		s->temp_c = (int)v;
	return s->sm_mhz > 0 ? 0 : -1;
}

void nvml_close(struct nvml *n)
{
	if (!n)
		return;
	n->shutdown();
	dlclose(n->lib);
	free(n);
}
