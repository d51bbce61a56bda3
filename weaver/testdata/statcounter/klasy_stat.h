/* SPDX-License-Identifier: GPL-2.0 */
/* The counter of klasy_stat.ko, for the module and the test's aspect. */
#ifndef _KLASY_STAT_H
#define _KLASY_STAT_H

struct klasy_stat {
	unsigned long bumps;
	long value;
};

#endif
