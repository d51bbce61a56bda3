// SPDX-License-Identifier: GPL-2.0
/*
 * Member accesses for the access resolver's tests, compiled at test time
 * with gcc -O2 -g -gdwarf-5 -fplugin=gcc-patches/klasy.so. Each function
 * is noinline unless it is meant to be inlined; MARK comments name lines.
 */
#include <stddef.h>

#define container_of(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))

struct inner {
	int fs;
	long z;
};

struct task {
	int count;
	int pad;
	struct inner *thread;
	struct inner emb;
	struct task *next;
	unsigned int flag_a : 3, flag_b : 5;
	long arr[4];
};

int sink;

__attribute__((noinline)) int get_count(struct task *t)
{
	return t->count; /* MARK get_count */
}

__attribute__((noinline)) void set_count(struct task *t, int n)
{
	t->count = n; /* MARK set_count */
}

__attribute__((noinline)) void inc_count(struct task *t)
{
	t->count++; /* MARK inc_count */
}

__attribute__((noinline)) long emb_z(struct task *t)
{
	return t->emb.z; /* MARK emb_z */
}

__attribute__((noinline)) int thread_fs(struct task *t)
{
	return t->thread->fs; /* MARK thread_fs */
}

__attribute__((noinline)) int two(struct task *a, struct task *b)
{
	return a->count * 3 + b->count; /* MARK two */
}

__attribute__((noinline)) int bits(struct task *t)
{
	return t->flag_b; /* MARK bits */
}

__attribute__((noinline)) int *pad_of(struct task *t)
{
	return &t->pad; /* MARK pad_of */
}

__attribute__((noinline)) struct task *from_emb(struct inner *e)
{
	return container_of(e, struct task, emb)->next; /* MARK from_emb */
}

static inline int peek(struct task *t)
{
	return t->count + 1; /* MARK peek */
}

__attribute__((noinline)) int peek_twice(struct task *t, struct task *u)
{
	return peek(t) * peek(u); /* MARK peek_twice */
}

__attribute__((noinline)) int peek_once(struct task *t)
{
	return peek(t) + 5; /* MARK peek_once */
}

__attribute__((noinline)) int sum_arr(struct task *t, int n)
{
	long s = 0;
	int i;

	for (i = 0; i < n; i++)
		s += t->arr[i & 3]; /* MARK sum_arr */
	return s;
}

__attribute__((noinline)) int walk(struct task *t)
{
	int n = 0;

	while (t) {
		n += t->count; /* MARK walk_count */
		t = t->next; /* MARK walk_next */
	}
	return n;
}

__attribute__((noinline)) int with_local(struct task *t, int k)
{
	int limit = k * 7;

	if (t->count > limit) /* MARK with_local */
		sink = limit;
	return limit;
}

struct trio {
	long a, b, c;
};

struct box {
	int tag;
	struct trio tr;
};

__attribute__((noinline)) struct inner *get_inner(struct task *t)
{
	return t->thread; /* MARK get_inner */
}

__attribute__((noinline)) int via_call(struct task *t)
{
	return get_inner(t)->fs; /* MARK via_call */
}

__attribute__((noinline)) long copy_trio(struct box *b, struct trio *out)
{
	*out = b->tr; /* MARK copy_trio */
	return out->c;
}

extern long consume(long, long);

/* b is last used by the line's last instruction, which overwrites its
 * register: at the line's end DWARF only has its entry value. */
__attribute__((noinline)) long last_use(struct box *b, long k)
{
	long v = b->tr.a + b->tr.c; /* MARK last_use */
	return consume(v, k);
}
