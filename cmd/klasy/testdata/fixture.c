// SPDX-License-Identifier: GPL-2.0
/*
 * Input for cmd/klasy's tests of klasy lines, vars, struct and funcs (a copy
 * of dwarfmap/testdata/fixture.c, so that the two can change apart),
 * compiled at test time with gcc -O2 -g.
 * Each construct dwarfmap indexes appears once on purpose: a static and a
 * global function, a function split into a .cold part, an inline function
 * with several inlined copies, a struct with an anonymous union and
 * bitfields, and variables that live in a register, a stack slot, a
 * location list, or nowhere (optimized out). Lines marked MARK: are found
 * by the test by their marker, so editing the file does not break it.
 */

struct packet {
	unsigned int len;
	union {
		unsigned long addr;
		struct {
			unsigned short port;
			unsigned short proto;
		};
	};
	unsigned char flag_a : 1;
	unsigned char flag_b : 3;
	unsigned char kind;
	int data[4];
	void (*done)(struct packet *);
};

typedef struct {
	int locked;
} lock_t;

typedef int not_a_struct;

struct holder {
	lock_t lock;
	not_a_struct n;
};

extern void sink(void *p);
extern void hold(struct holder *h);
extern void fail(const char *why) __attribute__((cold, noreturn));
volatile int global_knob;

static inline int scale(int v, int factor)
{
	int r = v * factor; /* MARK:scale_body */
	return r + global_knob;
}

static __attribute__((noinline)) int helper(int x)
{
	return scale(x, 3) + scale(x, 5); /* MARK:helper_calls */
}

int process(struct packet *p, int n)
{
	int buf[4]; /* MARK:buf_decl */
	int total = 0;
	int i;

	if (__builtin_expect(p == 0, 0))
		fail("null packet"); /* MARK:cold_call */
	for (i = 0; i < n; i++) {
		int step = helper(i); /* MARK:loop_body */
		total += step;
		buf[i & 3] = total;
	}
	sink(buf); /* MARK:sink_call */
	total = total * 7 +
		n; /* MARK:continued */
	p->len = total;
	return p->kind + total; /* MARK:return */
}

int main(void)
{
	struct packet p = { 0 };
	struct holder h = { 0 };

	hold(&h);
	return process(&p, global_knob);
}
