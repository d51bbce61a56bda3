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

/* The same with the member set apart in the middle (proc_taint's
 * t.data): the first word's load is a copy's though not next to the
 * rest; t.procname = table->procname; .. one by one is the same code. */
struct ctl {
	const char *procname;
	void *data;
	int maxlen;
	int mode;
	void *handler;
	void *poll;
	void *extra1;
	void *extra2;
};

noinline int handle_copy_gap(const struct ctl *table)
{
	struct ctl t;
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

/* An inlined memset through a pointer: its first and last words stored
 * apart, the rest by rep stos from 8 bytes past its start, rounded down.
 * The lea of that address names no member (here info's devid, whose
 * address the source does not take); the memset of a member (o->in)
 * is that member's address. The words stored apart name no member
 * either: a head or tail word and a member store there are the same
 * store, and memset's are the words a lea beside them puts 8 bytes
 * before the start of a rep stos. */
struct info {
	int type;
	int flags;
	long devid;
	long a[9];
	char tail[4];
};

noinline void init_info(struct info *info, int type)
{
	memset(info, 0, sizeof(*info));
	info->type = type; /* want: info.type:store */
}

struct outer {
	long x;
	struct info in;
};

noinline void init_inner(struct outer *o)
{
	memset(&o->in, 0, sizeof(o->in)); /* want: outer.in:lea outer.in:store */
}

/* Compound literals whose stores GCC splits over blocks: the cases
 * share their tail (the jump into 2a: its stores of code, off and the
 * register byte), the zeroing store is in each case's own block. All
 * the stores on a path together build the whole struct. */
noinline int emit_case(const struct insn *si, struct insn *insn_buf, int t, int size)
{
	struct insn *insn = insn_buf;

	switch (t) {
	case 1:
		if (size == 2)
			*insn++ = (struct insn){ .code = 0x69, .dst = si->dst, .src = si->src, .off = 0x1a4 }; /* want-any: insn.dst:load insn.src:load */
		else
			*insn++ = (struct insn){ .code = 0x61, .dst = si->dst, .src = si->src, .off = 0x1a4 }; /* want-any: insn.dst:load insn.src:load */
		break;
	case 2:
		*insn++ = (struct insn){ .code = 0x71, .dst = si->dst, .src = si->src, .off = 0x10 }; /* want-any: insn.dst:load insn.src:load */
		break;
	}
	return insn - insn_buf;
}

/* Instructions that read or write a whole structure at their operand
 * (a descriptor table register, an FPU save area): the source hands the
 * asm the structure, naming no member inside it. */
struct desc_ptr {
	unsigned short size;
	unsigned long address;
} __attribute__((packed));

noinline void load_gdt(const struct desc_ptr *dtr)
{
	asm volatile("lgdt %0" : : "m"(*dtr));
}

struct fx_area {
	unsigned short cwd;
	unsigned short swd;
	int regs[126];
};

struct fpu_state {
	long flags;
	struct fx_area fx;
};

noinline void save_fx(struct fpu_state *s)
{
	asm volatile("fxsave %0" : "=m"(s->fx)); /* want-any: fpu_state.fx:load fpu_state.fx:store */
}

/* A struct passed by value, pushed word by word from where it lies: a
 * copy of the member (c->cm), not reads of the members inside. */
struct mem_ops {
	void *(*alloc)(void *opaque, long n);
	void (*free)(void *opaque, void *p);
	void *opaque;
};

noinline void free_with(struct mem_ops m, void *p)
{
	if (m.free) /* want-any: mem_ops.free:load */
		m.free(m.opaque, p); /* want-any: mem_ops.free:load mem_ops.opaque:load */
}

struct ctx {
	long n;
	struct mem_ops cm;
};

noinline void free_ctx(struct ctx *c, void *p)
{
	free_with(c->cm, p); /* want: ctx.cm:load */
}

/* The same from the frame: push 0x18(%rsp) thrice pushes the three
 * words of m, the stack pointer moving between. */
noinline void free_both(struct mem_ops m, void *p, void *q)
{
	free_with(m, p);
	free_with(m, q);
}

/* An embedded struct all of whose bytes immediates write: assigned a
 * constant (x->root = RB_ROOT_CACHED) or its members zeroed one by one
 * (x->root.rb_node = NULL; x->root.leftmost = NULL), the same stores.
 * The member holding it is sure, the members inside are not. */
struct root_cached {
	void *node;
	void *leftmost;
};

struct mapping {
	int flags;
	struct root_cached root;
};

#define ROOT_CACHED ((struct root_cached){ NULL, NULL })

noinline void mapping_init(struct mapping *m)
{
	m->root = ROOT_CACHED; /* want: mapping.root:store */
}
