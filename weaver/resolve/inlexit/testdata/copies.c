/* Inlined copies whose exits TestFindAgainstObjdump checks: early exits,
 * a loop, goto, a copy ending in a call; and copies left by a tail call
 * or a return, which Find refuses.
 */
#include <stdio.h>

volatile int sink;

__attribute__((noinline)) int ext(int x)
{
	sink += x;
	return x * 3;
}

static inline __attribute__((always_inline)) int early(int x)
{
	int i, s = 0;

	if (x < 0)
		return -1;
	for (i = 0; i < x; i++) {
		if (sink == i)
			return s;
		s += i * sink;
	}
	return s;
}

static inline __attribute__((always_inline)) int with_goto(int x)
{
	if (x == 7)
		goto out;
	sink = x;
	if (sink > 100)
		goto out;
	sink++;
	return 1;
out:
	sink = 0;
	return 0;
}

static inline __attribute__((always_inline)) void ends_in_call(int x)
{
	sink = x + 1;
	ext(x);
}

static inline __attribute__((always_inline)) int tail(int x)
{
	if (x)
		return ext(x + 1);
	return 0;
}

static inline __attribute__((always_inline)) int returns(int x)
{
	if (x > 5)
		return x * 2;
	sink = x;
	return 0;
}

static inline __attribute__((always_inline)) int twoway(int x)
{
	if (x & 1) {
		sink = 1;
		return 1;
	}
	sink = 2;
	return 0;
}

__attribute__((noinline)) int host_two(int x)
{
	if (twoway(x))
		ext(5);
	else
		ext(x + 9);
	return sink;
}

__attribute__((noinline)) int host_early(int x)
{
	int r = early(x);

	sink = r;
	return r + ext(r);
}

__attribute__((noinline)) int host_goto(int x)
{
	int r = with_goto(x);

	sink += r;
	return ext(r + x);
}

__attribute__((noinline)) int host_call(int x)
{
	ends_in_call(x);
	sink = 5;
	return ext(sink);
}

__attribute__((noinline)) int host_tail(int x)
{
	return tail(x);
}

__attribute__((noinline)) int host_loop(int x)
{
	return early(x);
}

__attribute__((noinline)) int host_ret(int x)
{
	return returns(x);
}

int main(int argc, char **argv)
{
	printf("%d\n", host_early(argc) + host_goto(argc) + host_call(argc) +
	       host_tail(argc) + host_loop(argc) + host_ret(argc) +
	       host_two(argc));
	return 0;
}
