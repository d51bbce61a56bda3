// SPDX-License-Identifier: GPL-2.0
/*
 * Test input for x86code: compiled at test time with gcc -O2 and -O0 and
 * disassembled by objdump, which says where each instruction starts.
 * Loops, a switch, calls, early returns and a cold error path give
 * branches forward and backward and blocks of every kind.
 */

extern void use(long v);
extern void fail(const char *why) __attribute__((noreturn, cold));

long sum(const long *v, int n)
{
	long s = 0;

	for (int i = 0; i < n; i++) {
		if (v[i] < 0)
			continue;
		s += v[i] * 3;
	}
	return s;
}

int classify(int c)
{
	switch (c) {
	case 0: return 10;
	case 1: return 7;
	case 2: use(c); return 3;
	case 3: return -1;
	case 5: return 42;
	case 8: use(8); break;
	default: break;
	}
	return c * 2;
}

void check(long *p, int n)
{
	if (!p)
		fail("null");
	while (n-- > 0) {
		use(*p);
		if (*p++ == 0x12345678)
			return;
	}
}

unsigned long mix(unsigned long a, unsigned long b)
{
	for (int r = 0; r < 4; r++) {
		a ^= b << 13;
		b += a >> 7;
		a = (a << 17) | (a >> 47);
	}
	return a + b;
}
