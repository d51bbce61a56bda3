// SPDX-License-Identifier: GPL-2.0
/* A function klasy cover's rendering test counts: a loop in a loop. */

int walk(const char *s, int stop)
{
	int n = 0;

	while (*s == '/')
		s++;
	for (; *s; s++) {
		if (*s == stop)
			return -1;
		n++;
	}
	return n;
}
