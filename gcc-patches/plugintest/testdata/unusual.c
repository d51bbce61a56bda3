// SPDX-License-Identifier: GPL-2.0
/*
 * Shapes the plugin must survive without crashing gcc: it records what it
 * understands and marks the rest unsupported. Compiled at test time with
 * -O2 -g (and -O0 by TestUnusual). _Atomic members are lowered to
 * __atomic builtins that take their address: the builtin gives the mode.
 */
#include "accesses.h"

struct flex {
	int n;
	int data[];
};

struct with_atomic {
	_Atomic int refs;
};

struct inner inners[8];

struct inner make_inner(int v);

int conditional_base(struct inner *a, struct inner *b, int c)
{
	return (c ? a : b)->fs;	/* want: inner.fs read unsupported:? */
}

int by_value(int v)
{
	return make_inner(v).z + (struct inner){ 1, 2 }.fs;	/* want: inner.z read call:&make_inner(v); inner.fs read unsupported:&? */
}

int flexible(struct flex *f, int i)
{
	return f->data[i] + f->n;	/* want: flex.data read param:f; flex.n read param:f */
}

int arithmetic(struct inner *p, void *v, unsigned long addr)
{
	return (p + 1)->fs + ((struct inner *)v)->z + ((struct inner *)addr)->fs;	/* want: inner.fs read param:&p[1]; inner.z read param:v; inner.fs read param:addr */
}

int global_array(int i)
{
	return inners[i].fs + inners[3].z;	/* want: inner.fs read global:&inners[i]; inner.z read global:&inners[3] */
}

int atomics(struct with_atomic *w)
{
	w->refs += 1;	/* want: with_atomic.refs rw param:w */
	return w->refs;	/* want: with_atomic.refs read param:w */
}

unsigned long offset_trick(void)
{
	return (unsigned long)&((struct task *)0)->count;
}

int loops(struct task *p)
{
	int n = 0;

	for (struct task *t = p; t->next; t = t->next)	/* want: task.next read local:t; task.next read local:t */
		n++;
	while (p->count > n)	/* want: task.count read param:p */
		n += p->arr[n & 3];	/* want: task.arr read param:p */
	do
		n--;
	while (p->emb.z < n);	/* want: task.emb read param:p; inner.z read param:&p->emb */
	switch (p->flag_a) {	/* want: task.flag_a read param:p */
	case 1:
		return p->ax;	/* want: task.ax read param:p */
	default:
		break;
	}
	return n;
}

int statement_expressions(struct task *p)
{
	return ({ struct task *__q = p->next; __q; })->count +	/* want: task.next read param:p; task.count read param:p->next */
	       ({ int __v = p->ax; __v; });	/* want: task.ax read param:p */
}

int nested_function(struct task *p)
{
	int inner_fn(int k) { return p->arr[k]; }	/* want: task.arr read param:p */

	return inner_fn(1);
}

int asm_operands(struct task *p)
{
	asm volatile("" : "+m"(p->count) : "m"(p->ax));	/* want: task.count rw param:p; task.ax read param:p */
	return 0;
}

int generic(struct task *p)
{
	return _Generic(p->count, int: p->ax, default: 0);	/* want: task.ax read param:p */
}

void struct_copy(struct task *p, struct task *q)
{
	*p = *q;
}

int deep(struct task *p)
{
	return p->next->next->next->next->next->next->next->next->count;	/* want: task.next read param:p; task.next read param:p->next; task.next read param:p->next->next; task.next read param:p->next->next->next; task.next read param:p->next->next->next->next; task.next read param:p->next->next->next->next->next; task.next read param:p->next->next->next->next->next->next; task.next read param:p->next->next->next->next->next->next->next; task.count read param:p->next->next->next->next->next->next->next->next */
}

/* RELOC_HIDE-style laundering through inline asm, as per_cpu_ptr does. */
#define HIDE(p) ({ unsigned long __ptr; __asm__("" : "=r"(__ptr) : "0"(p)); (struct inner *)__ptr; })

int hidden(struct inner *p)
{
	return HIDE(p)->fs;	/* want: inner.fs read unsupported:? */
}

int incremented(struct inner *p)
{
	return (++p)->fs;	/* want: inner.fs read unsupported:? */
}

int vla_struct(int n)
{
	struct { int len; int arr[n]; int after; } v;

	v.len = n;		/* want: .len write local:&v */
	v.after = n;		/* want: .after write local:&v */
	return v.after;		/* want: .after read local:&v */
}
