// SPDX-License-Identifier: GPL-2.0
//go:build ignore

/*
 * klasy_flow - the flow table: which object carries which flow ID, per
 * flow (klasy_flow.h says how and why). The same source is compiled into
 * klasy_runtime.ko and into the user-space harness of the Go tests and
 * benchmark; klasy_flow_kernel.c holds what only the kernel has (module
 * parameters, the flows by name, the free hooks, status). (The go:build
 * line above keeps Go from compiling this file.)
 */
#ifdef __KERNEL__
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/errno.h>
#include <linux/log2.h>
#include <linux/preempt.h>
#include <linux/slab.h>
#include <linux/string.h>
#endif

#include "klasy_flow.h"

/* IDs: counter << klasy_flow_dbits | klasy_flow_domain. */
static atomic_t klasy_flow_next = ATOMIC_INIT(0);
static unsigned int klasy_flow_domain;
static unsigned int klasy_flow_dbits;

int klasy_flow_setup_ids(unsigned int domain, unsigned int domains)
{
	if (domains < 1 || domains > KLASY_FLOW_DOMAINS_MAX || domain >= domains)
		return -EINVAL;
	klasy_flow_domain = domain;
	klasy_flow_dbits = order_base_2(domains);
	atomic_set(&klasy_flow_next, 0);
	return 0;
}

int klasy_flow_new_id(void)
{
	u32 id;

	do {
		id = (u32)atomic_inc_return(&klasy_flow_next) << klasy_flow_dbits |
		     klasy_flow_domain;
	} while (unlikely(!id));	/* domain 0, once every 2^32 IDs */
	return (int)id;
}
EXPORT_SYMBOL_GPL(klasy_flow_new_id);

static struct klasy_flow_bucket *klasy_obj_bucket(struct klasy_flow *f,
						  const void *obj)
{
	return &f->objs[hash_ptr(obj, f->bits)];
}

/* IDs equal in their low bits share a bucket: see truncation. */
static struct klasy_flow_bucket *klasy_id_bucket(struct klasy_flow *f, u32 id)
{
	return &f->ids[id & ((1U << f->bits) - 1)];
}

static struct klasy_flow_bucket *klasy_buckets(unsigned int bits)
{
	struct klasy_flow_bucket *b;
	unsigned int i;

	b = kvcalloc(1U << bits, sizeof(*b), GFP_KERNEL);
	if (!b)
		return NULL;
	for (i = 0; i < 1U << bits; i++) {
		spin_lock_init(&b[i].lock);
		INIT_HLIST_HEAD(&b[i].head);
	}
	return b;
}

int klasy_flow_init(struct klasy_flow *f, const char *name, unsigned int bits)
{
	if (bits < KLASY_FLOW_BITS_MIN || bits > KLASY_FLOW_BITS_MAX ||
	    strscpy(f->name, name, sizeof(f->name)) < 0)
		return -EINVAL;
	f->bits = bits;
	f->objs = klasy_buckets(bits);
	f->ids = klasy_buckets(bits);
	f->stats = alloc_percpu(struct klasy_flow_stats);
	if (!f->objs || !f->ids || !f->stats) {
		klasy_flow_destroy(f);
		return -ENOMEM;
	}
	return 0;
}

void klasy_flow_destroy(struct klasy_flow *f)
{
	struct klasy_flow_entry *e;
	struct hlist_node *tmp;
	unsigned int i;

	for (i = 0; f->objs && i < 1U << f->bits; i++) {
		hlist_for_each_entry_safe(e, tmp, &f->objs[i].head, node)
			kfree(e);
	}
	kvfree(f->objs);
	kvfree(f->ids);
	free_percpu(f->stats);
	f->objs = NULL;
	f->ids = NULL;
	f->stats = NULL;
}

/* Puts e in the ID index; the caller holds e's object bucket's lock. */
static void klasy_id_link(struct klasy_flow *f, struct klasy_flow_entry *e)
{
	struct klasy_flow_bucket *b = klasy_id_bucket(f, e->id);

	spin_lock(&b->lock);
	hlist_add_head_rcu(&e->id_node, &b->head);
	spin_unlock(&b->lock);
}

static void klasy_id_unlink(struct klasy_flow *f, struct klasy_flow_entry *e)
{
	struct klasy_flow_bucket *b = klasy_id_bucket(f, e->id);

	spin_lock(&b->lock);
	hlist_del_rcu(&e->id_node);
	spin_unlock(&b->lock);
}

/* The entry of obj, under rcu_read_lock() or its bucket's lock. */
static struct klasy_flow_entry *klasy_find(struct klasy_flow_bucket *b,
					   const void *obj)
{
	struct klasy_flow_entry *e;

	hlist_for_each_entry_rcu(e, &b->head, node, lockdep_is_held(&b->lock)) {
		if (e->obj == obj)
			return e;
	}
	return NULL;
}

int klasy_flow_lookup(struct klasy_flow *f, const void *obj)
{
	struct klasy_flow_entry *e;
	u32 id = 0;

	rcu_read_lock();
	e = klasy_find(klasy_obj_bucket(f, obj), obj);
	if (e)
		id = e->id;
	rcu_read_unlock();
	if (id)
		this_cpu_inc(f->stats->hits);
	else
		this_cpu_inc(f->stats->misses);
	return (int)id;
}
EXPORT_SYMBOL_GPL(klasy_flow_lookup);

/*
 * Takes obj's entry out of both indexes and returns it (the caller frees
 * it after a grace period), or NULL. Objects without an entry, the common
 * case of <quit> and of the free hook, cost one lookup and no lock.
 */
static struct klasy_flow_entry *klasy_unlink(struct klasy_flow *f,
					     const void *obj)
{
	struct klasy_flow_bucket *b = klasy_obj_bucket(f, obj);
	struct klasy_flow_entry *e;
	unsigned long flags;

	rcu_read_lock();
	e = klasy_find(b, obj);
	rcu_read_unlock();
	if (!e)
		return NULL;
	spin_lock_irqsave(&b->lock, flags);
	e = klasy_find(b, obj);
	if (e) {
		hlist_del_rcu(&e->node);
		WRITE_ONCE(b->n, b->n - 1);
		klasy_id_unlink(f, e);
	}
	spin_unlock_irqrestore(&b->lock, flags);
	return e;
}

void klasy_flow_remove(struct klasy_flow *f, const void *obj)
{
	struct klasy_flow_entry *e;

	if (unlikely(in_nmi())) {
		this_cpu_inc(f->stats->dropped);
		return;
	}
	e = klasy_unlink(f, obj);
	if (e)
		kfree_rcu(e, rcu);
}
EXPORT_SYMBOL_GPL(klasy_flow_remove);

bool klasy_flow_forget(struct klasy_flow *f, const void *obj)
{
	struct klasy_flow_entry *e = klasy_unlink(f, obj);

	if (!e)
		return false;
	this_cpu_inc(f->stats->freed);
	kfree_rcu(e, rcu);
	return true;
}

void klasy_flow_register(struct klasy_flow *f, const void *obj, int id)
{
	struct klasy_flow_bucket *b = klasy_obj_bucket(f, obj);
	struct klasy_flow_entry *e, *cur, *old = NULL, *last = NULL;
	unsigned long flags;

	if (!id) {
		klasy_flow_remove(f, obj);
		return;
	}
	if (unlikely(in_nmi())) {
		this_cpu_inc(f->stats->dropped);
		return;
	}
	e = kmalloc(sizeof(*e), GFP_ATOMIC | __GFP_NOWARN);
	if (unlikely(!e)) {
		this_cpu_inc(f->stats->dropped);
		return;
	}
	e->obj = obj;
	e->id = (u32)id;

	spin_lock_irqsave(&b->lock, flags);
	hlist_for_each_entry(cur, &b->head, node) {
		if (cur->obj == obj)
			old = cur;
		last = cur;	/* new entries go first: the last is the oldest */
	}
	if (old && old->id == e->id) {
		/* It carries that ID already. */
		spin_unlock_irqrestore(&b->lock, flags);
		kfree(e);
		return;
	}
	if (old) {
		/* Another ID: the new entry takes the old one's place. */
		hlist_replace_rcu(&old->node, &e->node);
		klasy_id_unlink(f, old);
	} else {
		if (b->n >= KLASY_FLOW_BUCKET_MAX) {
			old = last;
			hlist_del_rcu(&old->node);
			klasy_id_unlink(f, old);
			this_cpu_inc(f->stats->evictions);
		} else {
			WRITE_ONCE(b->n, b->n + 1);
		}
		hlist_add_head_rcu(&e->node, &b->head);
	}
	klasy_id_link(f, e);
	spin_unlock_irqrestore(&b->lock, flags);
	if (old)
		kfree_rcu(old, rcu);
}
EXPORT_SYMBOL_GPL(klasy_flow_register);

void klasy_flow_truncated(struct klasy_flow *f, int id, unsigned int bits)
{
	u32 x = (u32)id, kept, step, i;
	struct klasy_flow_entry *e;
	bool ambiguous = false;

	if (!x || bits >= 32)
		return;
	kept = (1U << bits) - 1;
	/*
	 * IDs equal to x in its low bits sit in the buckets equal to x in
	 * the bucket index's bits: one bucket unless bits < f->bits.
	 */
	step = 1U << min(bits, f->bits);
	rcu_read_lock();
	for (i = x & (step - 1); !ambiguous && i < 1U << f->bits; i += step) {
		hlist_for_each_entry_rcu(e, &f->ids[i].head, id_node) {
			if (e->id != x && !((e->id ^ x) & kept)) {
				ambiguous = true;
				break;
			}
		}
	}
	rcu_read_unlock();
	if (ambiguous)
		this_cpu_inc(f->stats->ambiguous);
}
EXPORT_SYMBOL_GPL(klasy_flow_truncated);

void klasy_flow_no_id(struct klasy_flow *f)
{
	this_cpu_inc(f->stats->noid);
}
EXPORT_SYMBOL_GPL(klasy_flow_no_id);

void klasy_flow_read(struct klasy_flow *f, struct klasy_flow_counts *c)
{
	struct klasy_flow_stats *s;
	unsigned int i;
	int cpu;

	memset(c, 0, sizeof(*c));
	for (i = 0; i < 1U << f->bits; i++)
		c->entries += READ_ONCE(f->objs[i].n);
	c->limit = (u64)KLASY_FLOW_BUCKET_MAX << f->bits;
	for_each_possible_cpu(cpu) {
		s = per_cpu_ptr(f->stats, cpu);
		c->sum.hits += READ_ONCE(s->hits);
		c->sum.misses += READ_ONCE(s->misses);
		c->sum.evictions += READ_ONCE(s->evictions);
		c->sum.freed += READ_ONCE(s->freed);
		c->sum.ambiguous += READ_ONCE(s->ambiguous);
		c->sum.dropped += READ_ONCE(s->dropped);
		c->sum.noid += READ_ONCE(s->noid);
	}
}
