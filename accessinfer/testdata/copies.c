/* Whole objects written or copied at once: an initializer, a compound
 * literal, a struct copy into a local. The source names no member
 * there, and the plugin records none: inference must not either (lines
 * without "want:" expect no access). Built as the kernel is, without
 * SSE registers (TestFixtures). */
#include <string.h>

#define noinline __attribute__((noinline))

void consume(void *p);

struct insn {
	unsigned char code;
	unsigned char dst : 4, src : 4;
	short off;
	int imm;
};

noinline void emit_mov(struct insn *insn, int dst, int src)
{
	*insn++ = (struct insn){ .code = 0xbf, .dst = dst, .src = src };
	*insn = (struct insn){ .code = 0x95, .dst = src, .imm = dst };
}

struct table {
	const char *name;
	int maxlen;
	int mode;
	void *handler;
	void *poll;
	void *extra1;
	void *extra2;
	void *data;
};

noinline int handle_copy(const struct table *table)
{
	struct table t;
	long tmp = 0;

	t = *table;
	t.data = &tmp;
	consume(&t);
	return tmp;
}

struct big {
	int flags;
	int count;
	long a[30];
};

noinline void zeroed_local(int n)
{
	struct big b = { .flags = n };

	consume(&b);
}
