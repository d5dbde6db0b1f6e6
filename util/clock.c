#include "clock.h"

#include <time.h>

static double read_clock(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

double kt_clock_s(void)
{
	return read_clock(CLOCK_MONOTONIC);
}

double kt_unix_s(void)
{
	return read_clock(CLOCK_REALTIME);
}
