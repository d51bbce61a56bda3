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
#include <linux/bitops.h>
#include <linux/errno.h>
#include <linux/irq_work.h>
#include <linux/llist.h>
#include <linux/log2.h>
#include <linux/preempt.h>
#include <linux/slab.h>
#include <linux/string.h>
#endif

#include "klasy_flow.h"

/*
 * IDs: counter << klasy_flow_dbits | klasy_flow_domain, the counter the
 * low 32 - dbits bits of klasy_flow_next; the bits above count its wraps.
 */
static atomic64_t klasy_flow_next = ATOMIC64_INIT(0);
static unsigned int klasy_flow_domain;
static unsigned int klasy_flow_dbits;
static atomic_t klasy_flow_skipped = ATOMIC_INIT(0);
static atomic_t klasy_flow_none = ATOMIC_INIT(0);

int klasy_flow_setup_ids(unsigned int domain, unsigned int domains)
{
	if (domains < 1 || domains > KLASY_FLOW_DOMAINS_MAX || domain >= domains)
		return -EINVAL;
	klasy_flow_domain = domain;
	klasy_flow_dbits = order_base_2(domains);
	atomic64_set(&klasy_flow_next, 0);
	atomic_set(&klasy_flow_skipped, 0);
	atomic_set(&klasy_flow_none, 0);
	return 0;
}

void klasy_flow_read_ids(struct klasy_flow_id_counts *c)
{
	c->wraps = atomic64_read(&klasy_flow_next) >> (32 - klasy_flow_dbits);
	c->skipped = atomic_read(&klasy_flow_skipped);
	c->none = atomic_read(&klasy_flow_none);
}

/*
 * The counter has 32 - dbits bits: with 256 domains it goes round after
 * 16.7M IDs, minutes at one ID per packet, while an object that got an
 * early ID may still carry it. Until the first wrap every ID is fresh by
 * construction and costs one atomic increment; after it, an ID registered
 * in a flow table of this runtime (klasy_flows_id_live: one ID bucket per
 * table) is passed over and counted as skipped, so no two objects
 * registered here get one ID from two starts. Not checked: an ID taken
 * and not registered yet, and one live only in another domain's tables.
 * Whether the counter went round is in the same atomic 64-bit increment
 * that takes the ID (its bits above the counter's), so no CPU can take
 * an ID after a wrap and see none. The tries are bounded (this runs in
 * NMI context too): when KLASY_FLOW_ID_TRIES IDs in a row are live, the
 * caller gets 0, no ID (register_flowid of 0 registers nothing), counted
 * as none.
 */
int klasy_flow_new_id(void)
{
	unsigned int tries;
	u64 c;
	u32 id;

	for (tries = 0; tries < KLASY_FLOW_ID_TRIES; tries++) {
		c = atomic64_inc_return(&klasy_flow_next);
		id = (u32)c << klasy_flow_dbits | klasy_flow_domain;
		if (unlikely(!id))	/* domain 0, once a round */
			continue;
		if (likely(!(c >> (32 - klasy_flow_dbits))) ||
		    !klasy_flows_id_live(id))
			return (int)id;
		atomic_inc(&klasy_flow_skipped);
	}
	atomic_inc(&klasy_flow_none);
	return 0;
}
EXPORT_SYMBOL_GPL(klasy_flow_new_id);

static struct klasy_flow_bucket *klasy_obj_bucket(struct klasy_flow *f,
						  const void *obj)
{
	return &f->objs[hash_ptr(obj, f->bits)];
}

/*
 * The ID index is keyed by the ID turned right by the domain bits: the
 * counter's low bits first, so that a domain's IDs, equal in their low
 * dbits bits, spread over every bucket, not one in 2^dbits of them (with
 * 256 domains chains 256 times as long, walked in handlers). IDs equal in
 * their low bits above the domain's share a bucket: see truncation.
 */
static u32 klasy_id_key(u32 id)
{
	return ror32(id, klasy_flow_dbits);
}

static struct klasy_flow_bucket *klasy_id_bucket(struct klasy_flow *f, u32 id)
{
	return &f->ids[klasy_id_key(id) & ((1U << f->bits) - 1)];
}

/*
 * The object buckets' locks and the ID buckets' are two lockdep classes
 * (one raw_spin_lock_init each): an ID bucket is locked inside an object
 * bucket's lock, never the other way round.
 */
static struct klasy_flow_bucket *klasy_buckets(unsigned int bits, bool ids)
{
	struct klasy_flow_bucket *b;
	unsigned int i;

	b = kvcalloc(1U << bits, sizeof(*b), GFP_KERNEL);
	if (!b)
		return NULL;
	for (i = 0; i < 1U << bits; i++) {
		if (ids)
			raw_spin_lock_init(&b[i].lock);
		else
			raw_spin_lock_init(&b[i].lock);
		INIT_HLIST_HEAD(&b[i].head);
	}
	return b;
}

/*
 * The pools (klasy_flow.h, Contexts). The irq_work runs on the CPU that
 * queued it, once interrupts are on again (an NMI over; on PREEMPT_RT in
 * the CPU's irq_work thread): it hands the unlinked entries to kfree_rcu
 * and fills the pool up again, where allocating is allowed.
 */
static void klasy_pool_work(struct irq_work *w)
{
	struct klasy_flow_pool *p = container_of(w, struct klasy_flow_pool, work);
	struct klasy_flow_entry *e, *tmp;
	struct llist_node *dead = llist_del_all(&p->dead);

	llist_for_each_entry_safe(e, tmp, dead, lnode)
		kfree_rcu(e, rcu);
	while (atomic_read(&p->n) < KLASY_FLOW_POOL) {
		e = kmalloc(sizeof(*e), GFP_ATOMIC | __GFP_NOWARN);
		if (!e)
			break;
		llist_add(&e->lnode, &p->free);
		atomic_inc(&p->n);
	}
}

static int klasy_pools_init(struct klasy_flow *f)
{
	struct klasy_flow_entry *e;
	struct klasy_flow_pool *p;
	int cpu, i;

	f->pool = alloc_percpu(struct klasy_flow_pool);
	if (!f->pool)
		return -ENOMEM;
	for_each_possible_cpu(cpu) {
		p = per_cpu_ptr(f->pool, cpu);
		init_llist_head(&p->free);
		init_llist_head(&p->dead);
		atomic_set(&p->n, 0);
		init_irq_work(&p->work, klasy_pool_work);
		for (i = 0; i < KLASY_FLOW_POOL; i++) {
			e = kmalloc(sizeof(*e), GFP_KERNEL);
			if (!e)
				return -ENOMEM;
			llist_add(&e->lnode, &p->free);
			atomic_inc(&p->n);
		}
	}
	return 0;
}

static void klasy_pools_destroy(struct klasy_flow *f)
{
	struct klasy_flow_entry *e, *tmp;
	struct klasy_flow_pool *p;
	int cpu;

	if (!f->pool)
		return;
	for_each_possible_cpu(cpu) {
		p = per_cpu_ptr(f->pool, cpu);
		irq_work_sync(&p->work);
		/* No reader is left: the dead need no grace period. */
		llist_for_each_entry_safe(e, tmp, llist_del_all(&p->dead), lnode)
			kfree(e);
		llist_for_each_entry_safe(e, tmp, llist_del_all(&p->free), lnode)
			kfree(e);
	}
	free_percpu(f->pool);
	f->pool = NULL;
}

/*
 * A new entry, from the CPU's pool in every context: a handler may not
 * allocate on PREEMPT_RT (the slab's locks sleep there) nor in NMI.
 */
static struct klasy_flow_entry *klasy_entry_alloc(struct klasy_flow *f)
{
	struct klasy_flow_pool *p;
	struct llist_node *n;

	p = this_cpu_ptr(f->pool);
	n = llist_del_first(&p->free);	/* the CPU's only consumer */
	if (n)
		atomic_dec(&p->n);
	if (atomic_read(&p->n) < KLASY_FLOW_POOL / 2)
		irq_work_queue(&p->work);
	return n ? llist_entry(n, struct klasy_flow_entry, lnode) : NULL;
}

/* An entry no reader has seen goes back to the pool. */
static void klasy_entry_unused(struct klasy_flow *f,
			       struct klasy_flow_entry *e)
{
	struct klasy_flow_pool *p;

	p = this_cpu_ptr(f->pool);
	llist_add(&e->lnode, &p->free);
	atomic_inc(&p->n);
}

/*
 * An unlinked entry goes on the CPU's dead list, whose irq_work hands it
 * to kfree_rcu, in every context: kfree_rcu takes the CPU's kvfree_rcu
 * lock and may queue work or start a timer, and a handler can run where
 * its CPU holds one of those locks (an optimized kprobe or an ftrace_ops
 * hook on the timer or workqueue code, a tracepoint such as
 * timer:timer_start fired under the timer base's lock): it would spin on
 * it forever. llist_add and irq_work_queue take no lock.
 */
static void klasy_entry_free(struct klasy_flow *f, struct klasy_flow_entry *e)
{
	struct klasy_flow_pool *p = this_cpu_ptr(f->pool);

	llist_add(&e->lnode, &p->dead);
	irq_work_queue(&p->work);
}

int klasy_flow_init(struct klasy_flow *f, const char *name, unsigned int bits)
{
	if (bits < KLASY_FLOW_BITS_MIN || bits > KLASY_FLOW_BITS_MAX ||
	    strscpy(f->name, name, sizeof(f->name)) < 0)
		return -EINVAL;
	f->bits = bits;
	f->objs = klasy_buckets(bits, false);
	f->ids = klasy_buckets(bits, true);
	f->stats = alloc_percpu(struct klasy_flow_stats);
	if (!f->objs || !f->ids || !f->stats || klasy_pools_init(f)) {
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

	klasy_pools_destroy(f);
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

/*
 * How deep this CPU is inside the table's locked sections: see Contexts
 * (re-entry) in klasy_flow.h. Interrupts are off while it is non-zero, so
 * only an NMI or a hook on a function the section calls can see it set.
 */
static DEFINE_PER_CPU(unsigned int, klasy_flow_depth);

/*
 * Enters a locked section with interrupts off; true if its locks may only
 * be tried: in NMI, or nested in another section on this CPU, whose lock
 * this CPU may hold and would wait for forever.
 */
static bool klasy_flow_enter(unsigned long *flags)
{
	bool try;

	local_irq_save(*flags);
	try = in_nmi() || __this_cpu_read(klasy_flow_depth);
	__this_cpu_inc(klasy_flow_depth);
	return try;
}

static void klasy_flow_leave(unsigned long flags)
{
	__this_cpu_dec(klasy_flow_depth);
	local_irq_restore(flags);
}

/*
 * Takes l: spinning, or by trying a bounded number of times (try). A
 * second lock of one class (two ID buckets, in index order) is taken as
 * lockdep's subclass 1.
 */
static bool klasy_lock(raw_spinlock_t *l, bool try, int subclass)
{
	int i;

	if (!try) {
		raw_spin_lock_nested(l, subclass);
		return true;
	}
	for (i = 0; i < KLASY_FLOW_NMI_TRIES; i++) {
		if (raw_spin_trylock(l))
			return true;
		cpu_relax();
	}
	return false;
}

/*
 * Locks ID buckets a and b (b may be NULL or a) inside an object bucket's
 * lock, the lower first, so that two CPUs needing the same two cannot wait
 * for each other.
 */
static bool klasy_lock_ids(struct klasy_flow_bucket *a,
			   struct klasy_flow_bucket *b, bool try)
{
	if (b == a)
		b = NULL;
	if (b && b < a)
		swap(a, b);
	if (!klasy_lock(&a->lock, try, 0))
		return false;
	if (b && !klasy_lock(&b->lock, try, SINGLE_DEPTH_NESTING)) {
		raw_spin_unlock(&a->lock);
		return false;
	}
	return true;
}

static void klasy_unlock_ids(struct klasy_flow_bucket *a,
			     struct klasy_flow_bucket *b)
{
	if (b && b != a)
		raw_spin_unlock(&b->lock);
	raw_spin_unlock(&a->lock);
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
 * it after a grace period), or NULL: it had none, or a lock it could only
 * try was taken (counted as dropped). Objects without an entry, the
 * common case of <quit> and of the free hook, cost one lookup and no lock.
 */
static struct klasy_flow_entry *klasy_unlink(struct klasy_flow *f,
					     const void *obj)
{
	struct klasy_flow_bucket *b = klasy_obj_bucket(f, obj), *ib;
	struct klasy_flow_entry *e;
	unsigned long flags;
	bool try;

	rcu_read_lock();
	e = klasy_find(b, obj);
	rcu_read_unlock();
	if (!e)
		return NULL;
	try = klasy_flow_enter(&flags);
	if (!klasy_lock(&b->lock, try, 0))
		goto drop;
	e = klasy_find(b, obj);
	if (e) {
		ib = klasy_id_bucket(f, e->id);
		if (!klasy_lock_ids(ib, NULL, try)) {
			raw_spin_unlock(&b->lock);
			goto drop;
		}
		hlist_del_rcu(&e->node);
		WRITE_ONCE(b->n, b->n - 1);
		hlist_del_rcu(&e->id_node);
		klasy_unlock_ids(ib, NULL);
	}
	raw_spin_unlock(&b->lock);
	klasy_flow_leave(flags);
	return e;

drop:
	klasy_flow_leave(flags);
	this_cpu_inc(f->stats->dropped);
	return NULL;
}

void klasy_flow_remove(struct klasy_flow *f, const void *obj)
{
	struct klasy_flow_entry *e = klasy_unlink(f, obj);

	if (e)
		klasy_entry_free(f, e);
}
EXPORT_SYMBOL_GPL(klasy_flow_remove);

bool klasy_flow_forget(struct klasy_flow *f, const void *obj)
{
	struct klasy_flow_entry *e = klasy_unlink(f, obj);

	if (!e)
		return false;
	this_cpu_inc(f->stats->freed);
	klasy_entry_free(f, e);
	return true;
}

void klasy_flow_register(struct klasy_flow *f, const void *obj, int id)
{
	struct klasy_flow_bucket *b = klasy_obj_bucket(f, obj), *ib, *ob = NULL;
	struct klasy_flow_entry *e, *cur, *old = NULL, *last = NULL;
	bool try, evict = false;
	unsigned long flags;

	if (!id) {
		klasy_flow_remove(f, obj);
		return;
	}
	e = klasy_entry_alloc(f);
	if (unlikely(!e)) {
		this_cpu_inc(f->stats->dropped);
		return;
	}
	e->obj = obj;
	e->id = (u32)id;
	ib = klasy_id_bucket(f, e->id);

	try = klasy_flow_enter(&flags);
	if (!klasy_lock(&b->lock, try, 0))
		goto drop;
	hlist_for_each_entry(cur, &b->head, node) {
		if (cur->obj == obj)
			old = cur;
		last = cur;	/* new entries go first: the last is the oldest */
	}
	if (old && old->id == e->id) {
		/* It carries that ID already. */
		raw_spin_unlock(&b->lock);
		klasy_flow_leave(flags);
		klasy_entry_unused(f, e);
		return;
	}
	if (!old && b->n >= KLASY_FLOW_BUCKET_MAX) {
		old = last;
		evict = true;
	}
	if (old)
		ob = klasy_id_bucket(f, old->id);
	if (!klasy_lock_ids(ib, ob, try)) {
		raw_spin_unlock(&b->lock);
		goto drop;
	}
	if (old && !evict) {
		/* Another ID: the new entry takes the old one's place. */
		hlist_replace_rcu(&old->node, &e->node);
	} else {
		if (evict) {
			hlist_del_rcu(&old->node);
			this_cpu_inc(f->stats->evictions);
		} else {
			WRITE_ONCE(b->n, b->n + 1);
		}
		hlist_add_head_rcu(&e->node, &b->head);
	}
	if (old)
		hlist_del_rcu(&old->id_node);
	hlist_add_head_rcu(&e->id_node, &ib->head);
	klasy_unlock_ids(ib, ob);
	raw_spin_unlock(&b->lock);
	klasy_flow_leave(flags);
	if (old)
		klasy_entry_free(f, old);
	return;

drop:
	klasy_flow_leave(flags);
	klasy_entry_unused(f, e);
	this_cpu_inc(f->stats->dropped);
}
EXPORT_SYMBOL_GPL(klasy_flow_register);

bool klasy_flow_id_live(struct klasy_flow *f, u32 id)
{
	struct klasy_flow_entry *e;
	bool live = false;

	rcu_read_lock();
	hlist_for_each_entry_rcu(e, &klasy_id_bucket(f, id)->head, id_node) {
		if (e->id == id) {
			live = true;
			break;
		}
	}
	rcu_read_unlock();
	return live;
}

/* Whether ID bucket i holds an ID other than x with x's kept bits. */
static bool klasy_shares_kept(struct klasy_flow *f, u32 i, u32 x, u32 kept)
{
	struct klasy_flow_entry *e;

	hlist_for_each_entry_rcu(e, &f->ids[i].head, id_node) {
		if (e->id != x && !((e->id ^ x) & kept))
			return true;
	}
	return false;
}

/*
 * IDs equal to x in its low bits sit in the buckets equal to x's key in
 * the key's bits those fix (klasy_id_key: the kept bits above the domain
 * bits, lowest in the key): one bucket unless bits - dbits < f->bits, and
 * then 2^(f->bits - (bits - dbits)), which no handler may walk (512K
 * buckets for a narrow field in a table of 2^20). So at most
 * KLASY_FLOW_TRUNC_BUCKETS of them are looked at, those nearest to x's
 * own bucket in the bits the field cuts off (the IDs made just before and
 * after x, the likeliest to be live): for such a narrow field the count
 * is a lower bound, as it is anyway for IDs moved to another domain.
 */
void klasy_flow_truncated(struct klasy_flow *f, int id, unsigned int bits)
{
	u32 x = (u32)id, key = klasy_id_key(x), kept, low, n, j, d, i;
	bool ambiguous = false;

	if (!x || bits >= 32)
		return;
	kept = (1U << bits) - 1;
	/* The key's low bits that x's kept bits fix. */
	low = bits > klasy_flow_dbits ? bits - klasy_flow_dbits : 0;
	low = min(low, f->bits);
	n = 1U << (f->bits - low);	/* buckets holding x's kept bits */
	j = (key & ((1U << f->bits) - 1)) >> low;	/* x's own among them */
	rcu_read_lock();
	for (d = 0; !ambiguous && d < min(n, KLASY_FLOW_TRUNC_BUCKETS); d++) {
		/* j, j + 1, j - 1, j + 2, ... round the n buckets */
		i = (j + (d & 1 ? (d + 1) / 2 : n - d / 2)) & (n - 1);
		i = i << low | (key & ((1U << low) - 1));
		ambiguous = klasy_shares_kept(f, i, x, kept);
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
