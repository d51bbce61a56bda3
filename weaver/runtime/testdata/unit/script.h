/* SPDX-License-Identifier: GPL-2.0 */
/*
 * script.h - what the unit harnesses share to run a script of
 * operations: the line being run, failing at it, and its numbers.
 */
#ifndef _SCRIPT_H
#define _SCRIPT_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* The script's line being run, for fail's messages. */
static int line_no;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void fail(const char *fmt, ...)
{
	va_list ap;

	printf("line %d: ", line_no);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	exit(1);
}

/* An unsigned number of the script (0x for hex), or fail. */
static inline unsigned long long script_num(const char *s)
{
	char *end;
	unsigned long long v;

	if (!s)
		fail("missing number");
	v = strtoull(s, &end, 0);
	if (!*s || *end)
		fail("%s: not a number", s);
	return v;
}

#endif
