/*
 * fake_nvml.c -- a stand-in for libnvidia-ml.so.1, built as a shared
 * library for the tests (KTUNE_NVML_LIB points the worker at it): it knows
 * every UUID and answers the calls tuner/nvml.c makes.
 *
 * KTUNE_FAKE_NVML_SM="1980,1400" gives the SM clocks returned by successive
 * readings, cycling (default 1980); power and temperature follow the clock
 * (a slower clock reads as a hotter, thirstier GPU), memory is 3201 MHz.
 * KTUNE_FAKE_NVML_FAIL=1 makes nvmlInit fail, as on a machine whose driver
 * is broken.
 */
#include <stdlib.h>
#include <string.h>

typedef struct fake_dev *nvml_dev;

static struct fake_dev {
	int dummy;
} the_dev;
static unsigned long long reads;
static int last_mhz = 1980;

int nvmlInit_v2(void)
{
	const char *f = getenv("KTUNE_FAKE_NVML_FAIL");

	return f && strcmp(f, "1") == 0 ? 999 : 0;
}

int nvmlShutdown(void)
{
	return 0;
}

int nvmlDeviceGetHandleByUUID(const char *uuid, nvml_dev *dev)
{
	if (!uuid || !dev)
		return 2;	/* NVML_ERROR_INVALID_ARGUMENT */
	*dev = &the_dev;
	return 0;
}

/* The n-th value of the comma-separated list (cycling), else def. */
static int nth(const char *list, unsigned long long n, int def)
{
	const char *p = list;
	unsigned long long count = 0, k;

	if (!list || !*list)
		return def;
	for (p = list; *p; p++)
		count += *p == ',';
	count++;
	k = n % count;
	for (p = list; k > 0; p++)
		if (*p == ',')
			k--;
	return atoi(p);
}

int nvmlDeviceGetClockInfo(nvml_dev dev, int type, unsigned *mhz)
{
	if (dev != &the_dev || !mhz)
		return 2;
	if (type == 1) {	/* SM */
		last_mhz = nth(getenv("KTUNE_FAKE_NVML_SM"), reads++, 1980);
		*mhz = (unsigned)last_mhz;
		return 0;
	}
	if (type == 2) {	/* memory */
		*mhz = 3201;
		return 0;
	}
	return 3;		/* NVML_ERROR_NOT_SUPPORTED */
}

int nvmlDeviceGetPowerUsage(nvml_dev dev, unsigned *mw)
{
	if (dev != &the_dev || !mw)
		return 2;
	*mw = (unsigned)(400000 + (1980 - last_mhz) * 200);
	return 0;
}

int nvmlDeviceGetTemperature(nvml_dev dev, int sensor, unsigned *c)
{
	if (dev != &the_dev || !c || sensor != 0)
		return 2;
	*c = (unsigned)(50 + (1980 - last_mhz) / 20);
	return 0;
}
