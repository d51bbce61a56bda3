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
#include <string.h>

/* The most words a script line has; args beyond them are NULL. */
#define SCRIPT_ARGS 16

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

/*
 * Splits line, a '#' starting a comment, into at most SCRIPT_ARGS
 * words in args, the rest NULL; returns how many.
 */
static inline int script_args(char *line, char *args[SCRIPT_ARGS])
{
	char *tok, *save;
	int nargs = 0, i;

	if (strchr(line, '#'))
		*strchr(line, '#') = '\0';
	for (tok = strtok_r(line, " \t\r\n", &save); tok && nargs < SCRIPT_ARGS;
	     tok = strtok_r(NULL, " \t\r\n", &save))
		args[nargs++] = tok;
	for (i = nargs; i < SCRIPT_ARGS; i++)
		args[i] = NULL;
	return nargs;
}

#endif
