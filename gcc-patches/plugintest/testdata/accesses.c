// SPDX-License-Identifier: GPL-2.0
/*
 * Every kind of member access the klasy plugin records, compiled at test
 * time with -O2 -g. A trailing want comment lists the records of its line
 * (see accesses.h); lines without one must have none.
 */
#include "accesses.h"

struct task global_task;
static struct task static_task;
int sink;

int direct(void)
{
	struct task local;

	local.arr[0] = 1;			/* want: task.arr write local:&local */
	sink = local.arr[0];			/* want: task.arr read local:&local */
	return global_task.count + static_task.next->count; /* want: task.count read global:&global_task; task.count read static:static_task.next; task.next read static:&static_task */
}

int pointer_and_nested(struct task *p)
{
	int x = p->thread->fs;			/* want: task.thread read param:p; inner.fs read param:p->thread */

	x += p->emb.z;				/* want: task.emb read param:p; inner.z read param:&p->emb */
	return x + p->next->next->ax;		/* want: task.next read param:p; task.next read param:p->next; task.ax read param:p->next->next */
}

int arrays(struct task **pp, struct task *p, int i)
{
	int x = pp[0]->threads[1]->fs;		/* want: task.threads read param:pp[0]; inner.fs read param:pp[0]->threads[1] */

	x += p->arr[i];				/* want: task.arr read param:p */
	return x + pp[i]->count;		/* want: task.count read param:pp[i] */
}

int macro_hidden(struct task *p)
{
	return task_fs(p);			/* want: task.thread read param:p; inner.fs read param:p->thread */
}

int header_inline(struct task *p)
{
	return task_count(p);
}

int multi_line(struct task *p, int a)
{
	if (a > 3 &&
	    p->emb.fs > 2)			/* want: task.emb read param:p; inner.fs read param:&p->emb */
		return 1;
	return 0;
}

int anonymous(struct task *p, anon_t *an)
{
	struct {
		int k;
	} loose;

	loose.k = an->b;			/* want: .k write local:&loose; anon_t.b read param:an */
	return loose.k + p->ax + p->wide;	/* want: .k read local:&loose; task.ax read param:p; task.wide read param:p */
}

float unions(union value *v)
{
	v->i = 3;				/* want: value.i write param:v */
	return v->f;				/* want: value.f read param:v */
}

int bitfields(struct task *p)
{
	p->flag_b = 7;				/* want: task.flag_b write param:p */
	return p->flag_a;			/* want: task.flag_a read param:p */
}

void writes(struct task *p, int n)
{
	p->count = n;				/* want: task.count write param:p */
	p->count += n;				/* want: task.count rw param:p */
	p->arr[1] |= 4;				/* want: task.arr rw param:p */
	p->emb.z++;				/* want: task.emb rw param:p; inner.z rw param:&p->emb */
	--p->flag_a;				/* want: task.flag_a rw param:p */
}

int *address_taken(struct task *p)
{
	sink = *&p->count;			/* want: task.count read param:p */
	return &p->emb.fs;			/* want: task.emb addr param:p; inner.fs addr param:&p->emb */
}

int once(struct task *p)
{
	WRITE_ONCE(p->count, 1);		/* want: task.count write param:p */
	return READ_ONCE(p->ax);		/* want: task.ax read param:p */
}

int call_based(struct task *p)
{
	int x = current_task->count;		/* want: task.count read call:get_task() */

	return x + shinfo(p)->before;		/* want: holder.before read call:end_pointer(p) */
}

int from_member(struct inner *in)
{
	struct task *t = container_of(in, struct task, emb);

	return t->count + container_of(in, struct task, emb)->ax; /* want: task.count read local:t; task.ax read param:(char *)in - 40 */
}

static int unused_static(struct task *p)
{
	return p->count;
}

/* A macro temporary set straight from a variable, as NL_SET_ERR_MSG sets
 * __extack = (extack): the base is the variable. */
#define SET_COUNT(t, v) do { struct task *__t = (t); if (__t) __t->count = (v); } while (0)

void macro_temporary(struct task *t)
{
	SET_COUNT(t, 1);			/* want: task.count write param:t */
}

int from_member_chain(struct inner *in, struct task *p)
{
	return container_of(in, struct task, emb)->thread->fs + (p + 1)->next->ax; /* want: task.thread read param:(char *)in - 40; inner.fs read param:((char *)in - 40)->thread; task.next read param:&p[1]; task.ax read param:(&p[1])->next */
}
