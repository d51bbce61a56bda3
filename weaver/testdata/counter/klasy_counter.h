/* SPDX-License-Identifier: GPL-2.0 */
/* The counter of klasy_counter.ko, for the module and the test's aspect. */
#ifndef _KLASY_COUNTER_H
#define _KLASY_COUNTER_H

struct klasy_counter {
	unsigned long bumps;
	long value;
	struct {
		long lo, hi;
	} span;
};

#endif
