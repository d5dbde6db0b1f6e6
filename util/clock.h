/*
 * clock.h -- the two clocks ktune reads: monotonic seconds for durations,
 * deadlines and timeouts; wall-clock (unix) seconds for what is stored or
 * shown.
 */
#ifndef KT_CLOCK_H
#define KT_CLOCK_H

double kt_clock_s(void);	/* CLOCK_MONOTONIC */
double kt_unix_s(void);		/* CLOCK_REALTIME */

#endif
