// SPDX-License-Identifier: GPL-2.0
/* The second compilation unit of the diescan test input (see a.c). */
#include "shared.h"

typedef struct { unsigned locked; } lock_t;

static lock_t lock;

static inline int clamp(int v)
{
	return v > 100 ? 100 : v;
}

int other(struct pair *p)
{
	lock.locked++;
	return clamp(p->v[0]) + clamp(p->v[1]);
}

/* Bitfields and a two-dimensional array, for the type DIEs' constants. */
struct bits {
	unsigned int lo:3, mid:9;
	int grid[2][3];
	unsigned long long hi:40;
};

struct bits bits_global;
