// SPDX-License-Identifier: GPL-2.0
//go:build ignore

/*
 * klasy_smap - the shared maps of woven aspects, part of
 * klasy_runtime.ko: what MAP_SET, MAP_GET and MAP_DELETE in advice read
 * and write (klasy_rt.h says what each does), shown in the stats file
 * after the aspect's aggregation maps.
 *
 * Why a preallocated table of buckets, each with a raw spinlock, and
 * not the kernel's rhashtable: advice runs in kprobe, ftrace and
 * tracepoint handlers, with interrupts possibly off and in NMI context
 * too. rhashtable inserts allocate (GFP_ATOMIC can fail, and allocating
 * in NMI context is not allowed at all) and grow from a worker, so a
 * burst of new keys fails in ways the advice cannot see; its
 * per-bucket bit spinlocks are not NMI-safe. Here nothing is allocated
 * after the aspect registers, an operation holds one bucket's lock for
 * a few loads and stores (interrupts off, so no handler on this CPU
 * can spin on a lock this CPU holds). Handlers do not nest on a CPU
 * (klasy_enter), and the stats reader marks its CPU as running one
 * while it holds a bucket, so no handler on the holder's CPU (an NMI,
 * or a hook inside the reader's unlock) ever spins on it. In NMI
 * context (where x86 runs an int3 kprobe's handler too) a bucket is
 * still only trylocked, up to KLASY_SMAP_NMI_TRIES times, which
 * outlasts any other CPU's hold of a few loads and stores (lockdep
 * checks no other acquire in NMI), and an operation that still finds
 * it locked is counted (busy), never waited on further. A map holds its size in keys
 * (KLASY_SMAP_ENTRIES or its MAP_SIZE: a count kept with
 * atomic_long_add_unless, so concurrent inserts cannot pass it) in
 * twice as many slots or more, KLASY_SMAP_WAYS a bucket, so that a
 * bucket is seldom full before the map is; a new key past the bound or
 * finding its bucket full is counted (overflow) and not kept, as BPF's
 * preallocated hash maps refuse keys when full, with no eviction.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/hardirq.h>
#include <linux/irqflags.h>
#include <linux/jhash.h>
#include <linux/kernel.h>
#include <linux/log2.h>
#include <linux/processor.h>
#include <linux/mm.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/spinlock.h>

#include "klasy_internal.h"

/* Trylocks of a bucket in NMI context before giving up (busy). */
#define KLASY_SMAP_NMI_TRIES 1000

struct klasy_smap_entry {
	u64 v;
	struct klasy_key key;	/* key.nw == 0: the slot is free */
};

struct klasy_smap_bucket {
	raw_spinlock_t lock;
	struct klasy_smap_entry e[KLASY_SMAP_WAYS];
};

struct klasy_smap {
	const char *name;
	unsigned int size;		/* keys it holds at most */
	unsigned int nbuckets;		/* a power of 2 */
	atomic_long_t overflow;		/* MAP_SETs of a key that found no room */
	atomic_long_t busy;		/* operations in NMI that found the bucket locked */
	atomic_long_t used;		/* keys held, at most size */
	struct klasy_smap_bucket *b;
};

void klasy_smap_free(struct klasy_aspect *a)
{
	unsigned int i;

	for (i = 0; a->smaps && i < a->nsmaps; i++)
		kvfree(a->smaps[i].b);
	kfree(a->smaps);
	a->smaps = NULL;
}

int klasy_smap_alloc(struct klasy_aspect *a)
{
	unsigned int i, j, size;

	a->smaps = NULL;
	if (!a->nsmaps)
		return 0;
	if (a->nsmaps > KLASY_SMAP_MAX || !a->smap_names) {
		pr_err("aspect %s: %u shared maps, at most %u\n", a->name,
		       a->nsmaps, KLASY_SMAP_MAX);
		return -E2BIG;
	}
	a->smaps = kcalloc(a->nsmaps, sizeof(*a->smaps), GFP_KERNEL);
	if (!a->smaps)
		goto nomem;
	for (i = 0; i < a->nsmaps; i++) {
		struct klasy_smap *m = &a->smaps[i];

		size = a->smap_sizes ? a->smap_sizes[i] : 0;
		if (size > KLASY_SMAP_MAX_ENTRIES) {
			pr_err("aspect %s: shared map %s of %u keys, at most %u\n",
			       a->name, a->smap_names[i], size,
			       KLASY_SMAP_MAX_ENTRIES);
			klasy_smap_free(a);
			return -E2BIG;
		}
		m->name = a->smap_names[i];
		m->size = size ? size : KLASY_SMAP_ENTRIES;
		m->nbuckets = roundup_pow_of_two(DIV_ROUND_UP(2 * m->size,
							      KLASY_SMAP_WAYS));
		m->b = kvcalloc(m->nbuckets, sizeof(*m->b), GFP_KERNEL);
		if (!m->b)
			goto nomem;
		for (j = 0; j < m->nbuckets; j++)
			raw_spin_lock_init(&m->b[j].lock);
	}
	return 0;

nomem:
	pr_err("aspect %s: no memory for %u shared maps\n", a->name, a->nsmaps);
	klasy_smap_free(a);
	return -ENOMEM;
}

/*
 * klasy_smap_lock locks key k's bucket of map (interrupts off), NULL
 * when the map does not exist or, in NMI context, when the bucket
 * stayed locked (counted).
 */
static struct klasy_smap_bucket *klasy_smap_lock(struct klasy_aspect *a,
						 unsigned int map,
						 const struct klasy_key *k,
						 unsigned long *flags)
{
	struct klasy_smap *m;
	struct klasy_smap_bucket *b;
	unsigned int i;

	if (unlikely(!a->smaps || map >= a->nsmaps))
		return NULL;
	m = &a->smaps[map];
	b = &m->b[jhash2((const u32 *)k->w, k->nw * 2, k->typed) &
		  (m->nbuckets - 1)];
	if (in_nmi()) {
		for (i = 0; i < KLASY_SMAP_NMI_TRIES; i++) {
			if (raw_spin_trylock_irqsave(&b->lock, *flags))
				return b;
			cpu_relax();
		}
		atomic_long_inc(&m->busy);
		return NULL;
	}
	raw_spin_lock_irqsave(&b->lock, *flags);
	return b;
}

static struct klasy_smap_entry *klasy_smap_find(struct klasy_smap_bucket *b,
						const struct klasy_key *k)
{
	unsigned int i;

	for (i = 0; i < KLASY_SMAP_WAYS; i++)
		if (b->e[i].key.nw && klasy_key_eq(&b->e[i].key, k))
			return &b->e[i];
	return NULL;
}

void klasy_smap_set(struct klasy_aspect *a, unsigned int map,
		    const struct klasy_key *k, u64 v)
{
	struct klasy_smap_bucket *b;
	struct klasy_smap_entry *e;
	unsigned long flags;
	unsigned int i;

	if (unlikely(!k->nw || k->nw > KLASY_KEY_WORDS)) {
		if (a->smaps && map < a->nsmaps)
			atomic_long_inc(&a->smaps[map].overflow);
		return;
	}
	b = klasy_smap_lock(a, map, k, &flags);
	if (!b)
		return;
	e = klasy_smap_find(b, k);
	for (i = 0; !e && i < KLASY_SMAP_WAYS; i++) {
		if (b->e[i].key.nw)
			continue;
		if (atomic_long_add_unless(&a->smaps[map].used, 1,
					   a->smaps[map].size)) {
			e = &b->e[i];
			e->key = *k;
		}
		break;
	}
	if (e)
		e->v = v;
	else
		atomic_long_inc(&a->smaps[map].overflow);
	raw_spin_unlock_irqrestore(&b->lock, flags);
}
EXPORT_SYMBOL_GPL(klasy_smap_set);

bool klasy_smap_get(struct klasy_aspect *a, unsigned int map,
		    const struct klasy_key *k, u64 *v)
{
	struct klasy_smap_bucket *b;
	struct klasy_smap_entry *e;
	unsigned long flags;

	if (unlikely(!k->nw || k->nw > KLASY_KEY_WORDS))
		return false;
	b = klasy_smap_lock(a, map, k, &flags);
	if (!b)
		return false;
	e = klasy_smap_find(b, k);
	if (e)
		*v = e->v;
	raw_spin_unlock_irqrestore(&b->lock, flags);
	return e;
}
EXPORT_SYMBOL_GPL(klasy_smap_get);

bool klasy_smap_delete(struct klasy_aspect *a, unsigned int map,
		       const struct klasy_key *k)
{
	struct klasy_smap_bucket *b;
	struct klasy_smap_entry *e;
	unsigned long flags;

	if (unlikely(!k->nw || k->nw > KLASY_KEY_WORDS))
		return false;
	b = klasy_smap_lock(a, map, k, &flags);
	if (!b)
		return false;
	e = klasy_smap_find(b, k);
	if (e) {
		e->key.nw = 0;
		atomic_long_dec(&a->smaps[map].used);
	}
	raw_spin_unlock_irqrestore(&b->lock, flags);
	return e;
}
EXPORT_SYMBOL_GPL(klasy_smap_delete);

/*
 * The stats reader's hold of bucket b. The reader is no handler, so
 * without the busy mark klasy_enter would let one run on this CPU while
 * b is held: an ftrace-ops hook on _raw_spin_unlock_irqrestore, or the
 * lock_release tracepoint of a lockdep kernel, runs inside the unlock
 * with b still held, and its MAP_SET of a key in b would spin for ever.
 * Marked, such a hit is counted as missed, as one inside a handler is.
 * Interrupts off first: nothing on this CPU runs between mark and lock.
 */
static void klasy_smap_read_lock(struct klasy_smap_bucket *b,
				 unsigned long *flags)
{
	local_irq_save(*flags);
	WRITE_ONCE(this_cpu_ptr(&klasy_hit)->busy, 1);
	barrier();
	raw_spin_lock(&b->lock);
}

static void klasy_smap_read_unlock(struct klasy_smap_bucket *b,
				   unsigned long flags)
{
	raw_spin_unlock(&b->lock);
	barrier();
	WRITE_ONCE(this_cpu_ptr(&klasy_hit)->busy, 0);
	local_irq_restore(flags);
}

/*
 * klasy_smap_show prints a's shared maps: an smap line each (entries=
 * its keys now, size= its bound), then an skey line per key (t= its
 * typed bitmap in hex, w= its words in hex, v= its value), in bucket
 * order: the reader sorts them. Each bucket is copied under its lock,
 * so every key is printed with a value it had.
 */
int klasy_smap_show(struct seq_file *sf, struct klasy_aspect *a)
{
	struct klasy_smap_entry *all;
	unsigned int i, j, w, n;
	unsigned long flags;

	for (i = 0; i < a->nsmaps && a->smaps; i++) {
		struct klasy_smap *m = &a->smaps[i];

		all = kvmalloc_array(m->nbuckets * KLASY_SMAP_WAYS,
				     sizeof(*all), GFP_KERNEL);
		if (!all)
			return -ENOMEM;
		n = 0;
		for (j = 0; j < m->nbuckets; j++) {
			struct klasy_smap_bucket *b = &m->b[j];

			klasy_smap_read_lock(b, &flags);
			for (w = 0; w < KLASY_SMAP_WAYS; w++)
				if (b->e[w].key.nw)
					all[n++] = b->e[w];
			klasy_smap_read_unlock(b, flags);
		}
		seq_printf(sf, "smap index=%u name=", i);
		klasy_put_token(sf, m->name);
		seq_printf(sf, " entries=%u size=%u overflow=%ld busy=%ld\n", n,
			   m->size,
			   atomic_long_read(&m->overflow),
			   atomic_long_read(&m->busy));
		for (j = 0; j < n; j++) {
			seq_printf(sf, "skey t=0x%x w=", all[j].key.typed);
			for (w = 0; w < all[j].key.nw; w++)
				seq_printf(sf, "%s%llx", w ? "," : "",
					   all[j].key.w[w]);
			seq_printf(sf, " v=%llu\n", all[j].v);
		}
		kvfree(all);
	}
	return 0;
}
