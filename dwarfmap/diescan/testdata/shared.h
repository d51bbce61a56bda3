/* SPDX-License-Identifier: GPL-2.0 */
struct pair {
	int n;
	int v[4];
};

typedef long word_t;

union word {
	word_t l;
	char c[8];
};

void fail(const char *why) __attribute__((noreturn, cold));
int other(struct pair *p);
