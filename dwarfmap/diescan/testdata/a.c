// SPDX-License-Identifier: GPL-2.0
/*
 * Test input for diescan, with b.c: compiled at test time in several ways
 * (DWARF 5 and 4, -O2 and -O0, linked and relocatable, compressed), then
 * scanned and compared with debug/dwarf's reading of the same DIEs.
 * Inline functions, a .cold part, lexical blocks, nested and anonymous
 * types and declarations give the scanner each kind of DIE it reads or
 * skips.
 */
#include "shared.h"

static inline int twice(int v)
{
	return v * 2;
}

static int helper(struct pair *p)
{
	int sum = 0;

	for (int i = 0; i < p->n; i++) {
		int t = twice(p->v[i]);

		if (t < 0)
			fail("negative");
		sum += t;
	}
	return sum;
}

int process(struct pair *p, union word *w)
{
	struct { int a, b; } local = { p->n, 2 };

	if (__builtin_expect(!p, 0))
		fail("null pair");
	w->l = helper(p) + twice(local.a) + local.b;
	return (int)w->l;
}

int main(void)
{
	struct pair p = { 2, { 3, 4 } };
	union word w;

	return process(&p, &w) + other(&p);
}
