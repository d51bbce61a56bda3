// SPDX-License-Identifier: GPL-2.0
//go:build ignore

/*
 * klasy_agg - the aggregation maps of woven aspects, part of
 * klasy_runtime.ko: what COUNT, SUM, MINIMUM, MAXIMUM, HIST, LHIST and
 * TIMER_START/TIMER_STOP in advice update (klasy_rt.h says what each
 * does), and the debugfs file that shows them merged over the CPUs:
 *
 *   /sys/kernel/debug/klasy/stats
 *
 * An aspect that aggregates gets, when it registers, an arena per CPU
 * for its maps' per-CPU data and a shared one for its timers' task
 * tables, sized by the room its advice module asks for (agg_room). A map
 * is carved out of them at the first hit of a macro use, under a lock
 * taken only then; every later hit writes its own CPU's arena with plain
 * stores. That needs no atomic instruction because at most one klasy
 * handler runs per CPU at a time (klasy_enter, klasy_hit in klasy_rt.h),
 * so no two updates of one CPU's data overlap. Readers run concurrently
 * and see each counter whole (aligned 64-bit stores), a hit either in or
 * not yet in; a new key is published after its fields.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/bitops.h>
#include <linux/debugfs.h>
#include <linux/hash.h>
#include <linux/jhash.h>
#include <linux/kernel.h>
#include <linux/math64.h>
#include <linux/mm.h>
#include <linux/overflow.h>
#include <linux/percpu.h>
#include <linux/sched.h>
#include <linux/sched/clock.h>
#include <linux/sched/task_stack.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/sort.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <linux/timekeeping.h>
#include <asm/unwind.h>

#include "klasy_internal.h"

/* One key of a keyed map on one CPU. */
struct klasy_kentry {
	u64 key;
	u64 n;		/* updates of key; 0: the slot is free */
	s64 val;	/* SUM: the sum; MINIMUM, MAXIMUM: the least, greatest */
};

/* A keyed map on one CPU: open addressing, linear probing, no removal. */
struct klasy_keyed {
	u64 dropped;		/* updates of a key that found no free slot */
	unsigned int used;	/* slots taken */
	unsigned int maxprobe;	/* the longest probe an insert needed */
	struct klasy_kentry e[KLASY_AGG_KEYS];
};

/*
 * One key of a _BY map on one CPU: followed, in a histogram, by its
 * buckets (the map's nbuckets).
 */
struct klasy_tentry {
	u64 n;		/* updates of key; 0: the slot is free */
	s64 val;	/* SUM: the sum; MINIMUM, MAXIMUM: the least, greatest */
	struct klasy_key key;
	u64 b[];
};

/* A _BY map on one CPU: as struct klasy_keyed, nkeys entries of esize. */
struct klasy_tmap {
	u64 dropped;		/* updates of a key that found no free slot */
	unsigned int used, maxprobe;
	u8 e[];
};

/* A histogram on one CPU. */
struct klasy_hist {
	u64 count;
	u64 b[];		/* the map's nbuckets */
};

/* A timer on one CPU: the STOPs that ran there. */
struct klasy_timer {
	u64 count;
	u64 wall_sum, wall_min, wall_max;
	u64 cpu_sum, cpu_min, cpu_max;
	u64 no_start;		/* STOPs of a task not inside the timer */
	u64 dropped;		/* STARTs that found no free task slot */
	u64 nested;		/* STARTs of a task already inside it */
	/*
	 * Outermost STARTs whose STOP never came: a START at their depth or
	 * above (klasy_timer_start), or their slot taken (klasy_tslot).
	 */
	u64 orphaned;
	u64 wall_b[KLASY_AGG_HIST_BUCKETS];
	u64 cpu_b[KLASY_AGG_HIST_BUCKETS];
};

/*
 * A task inside a timer. A task claims a slot with a compare-and-exchange
 * and from then on only it writes the slot: it runs on one CPU at a time.
 */
struct klasy_tslot {
	unsigned long task;	/* its task_struct; 0: free */
	u64 birth;		/* its start_time: tells a reused task_struct */
	u64 wall0, cpu0;	/* at the outermost START */
	unsigned long sp;	/* the probed SP at the outermost START */
	unsigned int frames;	/* its frames (klasy_frames) */
	unsigned int depth;	/* STARTs not stopped yet */
};

/* Slots a task may take in a timer's table, from its hash on. */
#define KLASY_TASK_PROBES 4

/* A timing older than this may give its slot up (klasy_tslot). */
#define KLASY_TIMER_STALE_NS (60 * NSEC_PER_SEC)

struct klasy_map {
	const struct klasy_map_desc *desc;	/* its first use */
	u8 kind;
	bool by;				/* a _BY map: struct klasy_tmap */
	unsigned int nbuckets;			/* HIST, LHIST */
	size_t off;				/* in each CPU's arena */
	struct klasy_tslot *tasks;		/* TIMER: KLASY_AGG_TASKS */
	struct klasy_key *tkeys;		/* TIMER_BY: the tasks' keys */
};

/* A use no map could be made for, listed in the stats. */
struct klasy_agg_fail {
	const struct klasy_map_desc *desc;
	const char *reason;	/* "conflict" or "room" */
	int with;		/* the map a conflict is with, else -1 */
};

#define KLASY_AGG_FAILS 16	/* uses listed; all are counted */

struct klasy_agg {
	arch_spinlock_t lock;		/* taken to make a map, nowhere else */
	unsigned int nmaps;		/* made: published with a release */
	unsigned int maxmaps;
	struct klasy_map *maps;
	size_t size, used;		/* of each CPU's arena */
	void **cpu;			/* nr_cpu_ids arenas */
	struct klasy_tslot *tasks;	/* the timers' task tables */
	unsigned int ntimers, usedtimers;
	struct klasy_key *tkeys;	/* the keyed timers' task keys */
	unsigned int ntkeys, usedtkeys;
	u64 __percpu *unclaimed;	/* hits of uses without a map */
	unsigned int nfailed;		/* uses without a map */
	unsigned int nfails;		/* listed: published with a release */
	struct klasy_agg_fail fails[KLASY_AGG_FAILS];
	struct klasy_map failed;	/* what a use without a map points to */
};

/* Keys per CPU of a _BY map of kind. */
static unsigned int klasy_by_keys(u8 kind)
{
	return kind == KLASY_AGG_HIST || kind == KLASY_AGG_LHIST ||
	       kind == KLASY_AGG_TIMER ?
	       KLASY_AGG_HIST_BY_KEYS : KLASY_AGG_BY_KEYS;
}

/* A _BY entry: a histogram's buckets or a timer's times after it. */
static size_t klasy_tentry_size(u8 kind, unsigned int nbuckets)
{
	if (kind == KLASY_AGG_TIMER)
		return sizeof(struct klasy_tentry) + sizeof(struct klasy_timer);
	return struct_size((struct klasy_tentry *)NULL, b,
			   kind == KLASY_AGG_HIST || kind == KLASY_AGG_LHIST ?
			   nbuckets : 0);
}

/*
 * In a keyed timer's data, its struct klasy_timer (the counts that have
 * no key: STOPs without a START, STARTs without a slot...) comes first,
 * its struct klasy_tmap after it.
 */
static size_t klasy_tmap_off(const struct klasy_map *m)
{
	return m->kind == KLASY_AGG_TIMER ? sizeof(struct klasy_timer) : 0;
}

static size_t klasy_map_size(u8 kind, unsigned int nbuckets, bool by)
{
	if (by)
		return (kind == KLASY_AGG_TIMER ? sizeof(struct klasy_timer) : 0) +
		       sizeof(struct klasy_tmap) + klasy_by_keys(kind) *
		       klasy_tentry_size(kind, nbuckets);
	switch (kind) {
	case KLASY_AGG_COUNT:
	case KLASY_AGG_SUM:
	case KLASY_AGG_MIN:
	case KLASY_AGG_MAX:
		return sizeof(struct klasy_keyed);
	case KLASY_AGG_HIST:
	case KLASY_AGG_LHIST:
		return struct_size((struct klasy_hist *)NULL, b, nbuckets);
	case KLASY_AGG_TIMER:
		return sizeof(struct klasy_timer);
	}
	return 0;
}

void klasy_agg_free(struct klasy_aspect *a)
{
	struct klasy_agg *g = a->agg;
	int cpu;

	if (!g)
		return;
	if (g->cpu) {
		for_each_possible_cpu(cpu)
			kvfree(g->cpu[cpu]);
		kfree(g->cpu);
	}
	kfree(g->maps);
	kvfree(g->tasks);
	kvfree(g->tkeys);
	free_percpu(g->unclaimed);
	kfree(g);
	a->agg = NULL;
}

int klasy_agg_alloc(struct klasy_aspect *a)
{
	const struct klasy_agg_room *r = &a->agg_room;
	unsigned int maxmaps = r->keyed + r->hist + r->lhist + r->timer +
			       r->by + r->hist_by + r->lhist_by + r->timer_by;
	struct klasy_agg *g;
	int cpu;

	if (maxmaps > KLASY_AGG_MAX_MAPS) {
		pr_err("aspect %s: room for %u aggregation maps, at most %u\n",
		       a->name, maxmaps, KLASY_AGG_MAX_MAPS);
		return -E2BIG;
	}
	g = kzalloc(sizeof(*g), GFP_KERNEL);
	if (!g)
		goto nomem;
	a->agg = g;
	g->lock = (arch_spinlock_t)__ARCH_SPIN_LOCK_UNLOCKED;
	g->unclaimed = alloc_percpu(u64);
	if (!g->unclaimed)
		goto nomem;
	if (!maxmaps)
		return 0;

	g->maxmaps = maxmaps;
	g->size = r->keyed * klasy_map_size(KLASY_AGG_COUNT, 0, false) +
		  r->hist * klasy_map_size(KLASY_AGG_HIST, KLASY_AGG_HIST_BUCKETS, false) +
		  r->lhist * klasy_map_size(KLASY_AGG_LHIST, KLASY_AGG_LHIST_MAX + 2, false) +
		  r->timer * klasy_map_size(KLASY_AGG_TIMER, 0, false) +
		  r->by * klasy_map_size(KLASY_AGG_COUNT, 0, true) +
		  r->hist_by * klasy_map_size(KLASY_AGG_HIST, KLASY_AGG_HIST_BUCKETS, true) +
		  r->lhist_by * klasy_map_size(KLASY_AGG_LHIST, KLASY_AGG_LHIST_MAX + 2, true) +
		  r->timer_by * klasy_map_size(KLASY_AGG_TIMER, 0, true);
	g->maps = kcalloc(maxmaps, sizeof(*g->maps), GFP_KERNEL);
	g->cpu = kcalloc(nr_cpu_ids, sizeof(*g->cpu), GFP_KERNEL);
	if (!g->maps || !g->cpu)
		goto nomem;
	for_each_possible_cpu(cpu) {
		g->cpu[cpu] = kvzalloc_node(g->size, GFP_KERNEL, cpu_to_node(cpu));
		if (!g->cpu[cpu])
			goto nomem;
	}
	if (r->timer + r->timer_by) {
		g->ntimers = r->timer + r->timer_by;
		g->tasks = kvcalloc(array_size(g->ntimers, KLASY_AGG_TASKS),
				    sizeof(*g->tasks), GFP_KERNEL);
		if (!g->tasks)
			goto nomem;
	}
	if (r->timer_by) {
		g->ntkeys = r->timer_by;
		g->tkeys = kvcalloc(array_size(r->timer_by, KLASY_AGG_TASKS),
				    sizeof(*g->tkeys), GFP_KERNEL);
		if (!g->tkeys)
			goto nomem;
	}
	return 0;

nomem:
	pr_err("aspect %s: no memory for %u aggregation maps (%zu bytes per CPU)\n",
	       a->name, maxmaps, g ? g->size : 0);
	klasy_agg_free(a);
	return -ENOMEM;
}

/* Whether use d names the map whose first use is md. */
static bool klasy_same_map(const struct klasy_map_desc *md,
			   const struct klasy_map_desc *d)
{
	if (md->name || d->name)
		return md->name && d->name && !strcmp(md->name, d->name);
	return md->kind == d->kind && md->line == d->line &&
	       !strcmp(md->file, d->file);
}

/* Whether use d may update map m: the same kind and buckets. */
static bool klasy_fits(const struct klasy_map *m,
		       const struct klasy_map_desc *d)
{
	const struct klasy_map_desc *md = m->desc;

	if (m->kind != d->kind || md->by != d->by || md->keykind != d->keykind)
		return false;
	return m->kind != KLASY_AGG_LHIST ||
	       (md->lo == d->lo && md->hi == d->hi && md->step == d->step);
}

/* The buckets of a histogram use, 0 if its bounds are wrong. */
static unsigned int klasy_buckets(const struct klasy_map_desc *d)
{
	u64 n;

	switch (d->kind) {
	case KLASY_AGG_HIST:
		return KLASY_AGG_HIST_BUCKETS;
	case KLASY_AGG_LHIST:
		/* LHIST checks these at compile time; a hand-written use may not. */
		if (d->step <= 0 || d->hi <= d->lo)
			return 0;
		n = div64_u64((u64)d->hi - (u64)d->lo, d->step);
		if (n * d->step != (u64)d->hi - (u64)d->lo || n > KLASY_AGG_LHIST_MAX)
			return 0;
		return n + 2;	/* below lo, n of step, hi and above */
	}
	return 0;
}

/* Makes a new map for use d in g's room; NULL when there is none. */
static struct klasy_map *klasy_new_map(struct klasy_agg *g,
				       const struct klasy_map_desc *d)
{
	unsigned int nb = klasy_buckets(d);
	struct klasy_map *m;
	size_t size;

	if (d->kind < KLASY_AGG_COUNT || d->kind > KLASY_AGG_TIMER ||
	    ((d->kind == KLASY_AGG_HIST || d->kind == KLASY_AGG_LHIST) && !nb))
		return NULL;
	size = klasy_map_size(d->kind, nb, d->by);
	if (g->nmaps >= g->maxmaps || size > g->size - g->used)
		return NULL;
	if (d->kind == KLASY_AGG_TIMER && g->usedtimers >= g->ntimers)
		return NULL;
	if (d->kind == KLASY_AGG_TIMER && d->by &&
	    g->usedtkeys >= g->ntkeys)
		return NULL;
	m = &g->maps[g->nmaps];
	m->desc = d;
	m->kind = d->kind;
	m->by = d->by;
	m->nbuckets = nb;
	m->off = g->used;
	g->used += size;
	if (d->kind == KLASY_AGG_TIMER)
		m->tasks = g->tasks + (size_t)g->usedtimers++ * KLASY_AGG_TASKS;
	if (d->kind == KLASY_AGG_TIMER && d->by)
		m->tkeys = g->tkeys + (size_t)g->usedtkeys++ * KLASY_AGG_TASKS;
	/* The arenas are zeroed: the map starts empty on every CPU. */
	smp_store_release(&g->nmaps, g->nmaps + 1);
	return m;
}

/*
 * klasy_make_map finds or makes the map of use d, at its first hit. It
 * runs in any context a hook fires in (NMI too): it takes a spinning lock
 * that nothing else takes while holding it, never on a CPU where a klasy
 * handler already runs (klasy_enter lets one run per CPU), and allocates
 * nothing. A use that gets no map points to g->failed from then on.
 */
static noinline struct klasy_map *klasy_make_map(struct klasy_agg *g,
						 struct klasy_map_desc *d)
{
	const char *reason = "room";
	struct klasy_map *m = NULL;
	unsigned long flags;
	unsigned int i;
	int with = -1;

	local_irq_save(flags);
	arch_spin_lock(&g->lock);
	if (d->map) {		/* made on another CPU meanwhile */
		m = d->map;
		goto out;
	}
	for (i = 0; i < g->nmaps; i++) {
		if (klasy_same_map(g->maps[i].desc, d)) {
			m = &g->maps[i];
			break;
		}
	}
	if (m && !klasy_fits(m, d)) {
		reason = "conflict";
		with = i;
		m = NULL;
	} else if (!m) {
		m = klasy_new_map(g, d);
	}
	if (!m) {
		if (g->nfails < KLASY_AGG_FAILS) {
			g->fails[g->nfails] = (struct klasy_agg_fail){
				.desc = d, .reason = reason, .with = with,
			};
			/* Pairs with klasy_show_aspect's acquire. */
			smp_store_release(&g->nfails, g->nfails + 1);
		}
		g->nfailed++;
		m = &g->failed;
	}
	/* Pairs with klasy_map_of's acquire: *m is set up. */
	smp_store_release(&d->map, m);
out:
	arch_spin_unlock(&g->lock);
	local_irq_restore(flags);
	return m;
}

/* The map of use d, or NULL (the hit counted as unclaimed). */
static __always_inline struct klasy_map *klasy_map_of(struct klasy_aspect *a,
						      struct klasy_map_desc *d)
{
	/* Pairs with klasy_make_map's release: the map is set up. */
	struct klasy_map *m = smp_load_acquire(&d->map);

	if (unlikely(!m))
		m = klasy_make_map(a->agg, d);
	if (likely(m->kind == d->kind && m->by == d->by))
		return m;
	this_cpu_inc(*a->agg->unclaimed);
	return NULL;
}

/* This CPU's data of map m. */
static __always_inline void *klasy_here(struct klasy_agg *g,
					const struct klasy_map *m)
{
	return g->cpu[raw_smp_processor_id()] + m->off;
}

/* Folds v into a keyed map's value: SUM adds, MINIMUM and MAXIMUM keep. */
static __always_inline void klasy_fold(u8 kind, s64 *val, s64 v)
{
	switch (kind) {
	case KLASY_AGG_SUM:
		WRITE_ONCE(*val, *val + v);
		break;
	case KLASY_AGG_MIN:
		if (v < *val)
			WRITE_ONCE(*val, v);
		break;
	case KLASY_AGG_MAX:
		if (v > *val)
			WRITE_ONCE(*val, v);
		break;
	}
}

void klasy_agg_keyed(struct klasy_aspect *a, struct klasy_map_desc *d,
		     u64 key, s64 v)
{
	struct klasy_map *m = klasy_map_of(a, d);
	struct klasy_kentry *e;
	struct klasy_keyed *t;
	unsigned int i, p;

	if (unlikely(!m))
		return;
	t = klasy_here(a->agg, m);
	i = hash_64(key, KLASY_AGG_KEY_BITS);
	for (p = 0; p < KLASY_AGG_KEYS; p++, i = (i + 1) & (KLASY_AGG_KEYS - 1)) {
		e = &t->e[i];
		if (!e->n) {
			e->key = key;
			e->val = v;
			/* A reader that sees n sees the key. */
			smp_store_release(&e->n, 1);
			t->used++;
			t->maxprobe = max(t->maxprobe, p);
			return;
		}
		if (e->key == key) {
			klasy_fold(d->kind, &e->val, v);
			WRITE_ONCE(e->n, e->n + 1);
			return;
		}
		/* Every key is within maxprobe of its hash: key is new. */
		if (p >= t->maxprobe && t->used == KLASY_AGG_KEYS)
			break;
	}
	t->dropped++;
}
EXPORT_SYMBOL_GPL(klasy_agg_keyed);

/* bpftrace's hist() bucket: below 0, 0, 1, then [2^k, 2^(k+1)). */
static unsigned int klasy_log2_bucket(s64 v)
{
	return v < 0 ? 0 : fls64(v) + 1;
}

/* The bucket of v in histogram m. */
static unsigned int klasy_bucket(const struct klasy_map *m,
				 const struct klasy_map_desc *d, s64 v)
{
	if (d->kind == KLASY_AGG_HIST)
		return klasy_log2_bucket(v);
	if (v < d->lo)
		return 0;
	if (v >= d->hi)
		return m->nbuckets - 1;
	return div64_u64((u64)v - (u64)d->lo, d->step) + 1;
}

void klasy_agg_hist(struct klasy_aspect *a, struct klasy_map_desc *d, s64 v)
{
	struct klasy_map *m = klasy_map_of(a, d);
	struct klasy_hist *h;
	unsigned int b;

	if (unlikely(!m))
		return;
	h = klasy_here(a->agg, m);
	b = klasy_bucket(m, d, v);
	WRITE_ONCE(h->b[b], h->b[b] + 1);
	WRITE_ONCE(h->count, h->count + 1);
}
EXPORT_SYMBOL_GPL(klasy_agg_hist);

void klasy_key_add(struct klasy_key *k, u32 kind, u64 v)
{
	char buf[KLASY_STR_MAX + 1];
	long room, got;

	if (k->nw >= KLASY_KEY_WORDS) {
		k->nw = KLASY_KEY_WORDS + 1;	/* no room: not counted */
		return;
	}
	if (!kind) {
		k->w[k->nw++] = v;
		return;
	}
	if (kind == KLASY_VAL_KSTACK) {	/* the id, as STORE_STACK keeps it */
		if (k->nw + 2 > KLASY_KEY_WORDS) {
			k->nw = KLASY_KEY_WORDS + 1;
			return;
		}
		k->typed |= 1U << k->nw;
		k->w[k->nw] = (u64)kind << 32 | sizeof(v);
		k->w[k->nw + 1] = v;
		k->nw += 2;
		return;
	}
	room = ((long)KLASY_KEY_WORDS - (long)k->nw - 1) * 8;
	if (room <= 0) {
		k->nw = KLASY_KEY_WORDS + 1;
		return;
	}
	got = klasy_read_str(buf, kind, (const void *)(unsigned long)v,
			     min_t(long, KLASY_STR_MAX, room));
	k->typed |= 1U << k->nw;
	k->w[k->nw] = (u64)kind << 32 | got;
	/* The key was zeroed: the last word's padding stays 0. */
	memcpy(&k->w[k->nw + 1], buf, got);
	k->nw += 1 + DIV_ROUND_UP(got, 8);
}
EXPORT_SYMBOL_GPL(klasy_key_add);

bool klasy_key_eq(const struct klasy_key *x, const struct klasy_key *y)
{
	return x->nw == y->nw && x->typed == y->typed &&
	       !memcmp(x->w, y->w, x->nw * sizeof(x->w[0]));
}

static struct klasy_tentry *klasy_tentry_at(struct klasy_tmap *t,
					    size_t esize, unsigned int i)
{
	return (struct klasy_tentry *)(t->e + i * esize);
}

/*
 * The entry of key k in t, a _BY map's data on this CPU: *fresh says it
 * is new, its key set and the rest zero (the arena is zeroed and entries
 * never removed), for the caller to fill and publish by setting n with a
 * release. NULL when t has no room for a new key.
 */
static struct klasy_tentry *klasy_tfind(struct klasy_tmap *t,
					const struct klasy_map *m,
					const struct klasy_key *k, bool *fresh)
{
	unsigned int nkeys = klasy_by_keys(m->kind), i, p;
	size_t esize = klasy_tentry_size(m->kind, m->nbuckets);
	struct klasy_tentry *e;

	i = jhash2((const u32 *)k->w, k->nw * 2, k->typed) & (nkeys - 1);
	for (p = 0; p < nkeys; p++, i = (i + 1) & (nkeys - 1)) {
		e = klasy_tentry_at(t, esize, i);
		if (!e->n) {
			e->key = *k;
			t->used++;
			t->maxprobe = max(t->maxprobe, p);
			*fresh = true;
			return e;
		}
		if (klasy_key_eq(&e->key, k)) {
			*fresh = false;
			return e;
		}
		/* Every key is within maxprobe of its hash: k is new. */
		if (p >= t->maxprobe && t->used == nkeys)
			break;
	}
	return NULL;
}

void klasy_agg_by(struct klasy_aspect *a, struct klasy_map_desc *d,
		  const struct klasy_key *k, s64 v)
{
	struct klasy_map *m = klasy_map_of(a, d);
	bool hist = d->kind == KLASY_AGG_HIST || d->kind == KLASY_AGG_LHIST;
	struct klasy_tentry *e;
	struct klasy_tmap *t;
	unsigned int b = 0;
	bool fresh;

	if (unlikely(!m))
		return;
	t = klasy_here(a->agg, m);
	if (unlikely(k->nw > KLASY_KEY_WORDS)) {
		t->dropped++;
		return;
	}
	e = klasy_tfind(t, m, k, &fresh);
	if (!e) {
		t->dropped++;
		return;
	}
	if (hist)
		b = klasy_bucket(m, d, v);
	if (fresh) {
		e->val = v;
		if (hist)
			e->b[b] = 1;
		/* A reader that sees n sees the key. */
		smp_store_release(&e->n, 1);
		return;
	}
	if (hist)
		WRITE_ONCE(e->b[b], e->b[b] + 1);
	else
		klasy_fold(d->kind, &e->val, v);
	WRITE_ONCE(e->n, e->n + 1);
}
EXPORT_SYMBOL_GPL(klasy_agg_by);

/*
 * The current task's time on a CPU, in ns: the scheduler's
 * sum_exec_runtime, brought up to now with the time since it last
 * accounted the task on this CPU (exec_start, in the same clock as
 * sched_clock_cpu where interrupt and steal time are not accounted
 * apart, as in Debian's 6.1). Without the runqueue's lock, which a hook
 * may not take, so read again if the scheduler's tick updated the two
 * in between.
 */
static u64 klasy_task_cpu_ns(void)
{
	struct sched_entity *se = &current->se;
	u64 start, sum, now;

	do {
		start = READ_ONCE(se->exec_start);
		sum = READ_ONCE(se->sum_exec_runtime);
		now = sched_clock_cpu(raw_smp_processor_id());
	} while (start != READ_ONCE(se->exec_start));
	return sum + ((s64)(now - start) > 0 ? now - start : 0);
}

static bool klasy_on_task_stack(unsigned long sp)
{
	return object_is_on_stack((void *)sp);
}

/* Frames klasy_frames counts at most: bounded work, in NMI too. */
#define KLASY_TIMER_FRAMES_MAX 128

/*
 * The probed context's frames up to its entry into the kernel (a syscall,
 * an exception), by the kernel's unwinder (ORC). Not the stack pointer:
 * the kernel moves each syscall's frames down by a random offset of up to
 * 1 KiB (RANDOMIZE_KSTACK_OFFSET, on by default in Debian), so the same
 * call in a later syscall is as often deeper on the stack as not, while
 * its frames are as many.
 */
static unsigned int klasy_frames(struct pt_regs *regs)
{
	struct unwind_state state;
	unsigned int n = 0;

	for (unwind_start(&state, current, regs, NULL);
	     !unwind_done(&state) && n < KLASY_TIMER_FRAMES_MAX;
	     unwind_next_frame(&state))
		n++;
	return n;
}

/*
 * The slot of the current task in timer m's table, or NULL. With claim,
 * a free slot becomes the task's; when none of its slots is free, the one
 * with the oldest outermost START, if that is older than
 * KLASY_TIMER_STALE_NS (the task exited while timed, or its STOP never
 * came and it never started again), and *stolen says so. The owner may
 * still write that slot (it is running its STOP right now): one timing of
 * either task may then be wrong, past a timing that long.
 */
static struct klasy_tslot *klasy_tslot(struct klasy_map *m, bool claim,
				       bool *stolen)
{
	unsigned long me = (unsigned long)current, old;
	unsigned int i = hash_long(me, KLASY_AGG_TASK_BITS), p;
	struct klasy_tslot *s, *oldest = NULL;
	u64 now;

	for (p = 0; p < KLASY_TASK_PROBES; p++) {
		s = &m->tasks[(i + p) & (KLASY_AGG_TASKS - 1)];
		if (READ_ONCE(s->task) == me)
			return s;
	}
	if (!claim)
		return NULL;
	for (p = 0; p < KLASY_TASK_PROBES; p++) {
		s = &m->tasks[(i + p) & (KLASY_AGG_TASKS - 1)];
		if (!READ_ONCE(s->task) && !cmpxchg(&s->task, 0, me))
			return s;
	}
	now = ktime_get_mono_fast_ns();
	for (p = 0; p < KLASY_TASK_PROBES; p++) {
		s = &m->tasks[(i + p) & (KLASY_AGG_TASKS - 1)];
		if ((s64)(now - READ_ONCE(s->wall0)) > KLASY_TIMER_STALE_NS &&
		    (!oldest || READ_ONCE(s->wall0) < READ_ONCE(oldest->wall0)))
			oldest = s;
	}
	old = oldest ? READ_ONCE(oldest->task) : 0;
	if (!old || cmpxchg(&oldest->task, old, me) != old)
		return NULL;
	*stolen = true;
	return oldest;
}

static void __klasy_timer_start(struct klasy_aspect *a,
				struct klasy_map_desc *d,
				const struct klasy_key *k)
{
	/* The probed context's, which kprobes' handler paths do not move. */
	struct klasy_hit *hit = this_cpu_ptr(&klasy_hit);
	unsigned long sp = hit->sp;
	struct klasy_map *m = klasy_map_of(a, d);
	struct klasy_tslot *s;
	struct klasy_timer *t;
	unsigned int frames;
	bool stolen = false;

	if (unlikely(!m))
		return;
	t = klasy_here(a->agg, m);
	s = klasy_tslot(m, true, &stolen);
	if (!s) {
		t->dropped++;
		return;
	}
	if (stolen)
		t->orphaned++;
	/*
	 * A START is nested in the timing under way only if it runs deeper
	 * on the same stack than the outermost START did: a recursion. One
	 * at the same depth or above comes from a new call after the one
	 * that started the timing returned without its STOP (a kretprobe
	 * that missed: a function with more sleepers than kretprobe
	 * instances; an error path past a line's STOP). Without this, that
	 * task's depth never went back to 0 and none of its later pairs was
	 * timed. Such a START starts afresh, and the STOP that never came is
	 * counted as orphaned. The depth is the probed context's frames
	 * (klasy_frames, from the registers the generated handler puts in
	 * the hit): kprobes' handler paths (int3, jump-optimized, ftrace) run
	 * at depths of their own, the probed context's is the same on each,
	 * so any START deeper than the outermost is inside it.
	 *
	 * Depths compare only on the task's own stack: a hook in an
	 * interrupt or a softirq runs on the CPU's IRQ stack with current
	 * the task it interrupted, and its START, while that task is timed,
	 * is nested in the task's timing, as any START is when either stack
	 * pointer is not on the task's stack (object_is_on_stack is
	 * arithmetic on current's stack page: safe in NMI too).
	 */
	frames = klasy_on_task_stack(sp) ? klasy_frames(hit->regs) : 0;
	if (!stolen && s->depth && s->birth == current->start_time) {
		if (!klasy_on_task_stack(s->sp) || !klasy_on_task_stack(sp) ||
		    frames > s->frames) {
			s->depth++;
			t->nested++;
			return;
		}
		t->orphaned++;
	}
	/* A new slot, one an exited task left with its task_struct, or taken. */
	s->birth = current->start_time;
	s->sp = sp;
	s->frames = frames;
	s->depth = 1;
	s->cpu0 = klasy_task_cpu_ns();
	s->wall0 = ktime_get_mono_fast_ns();
	/* Only this task writes or reads its slot's key. */
	if (m->by)
		m->tkeys[s - m->tasks] = *k;
}

void klasy_timer_start(struct klasy_aspect *a, struct klasy_map_desc *d)
{
	__klasy_timer_start(a, d, NULL);
}
EXPORT_SYMBOL_GPL(klasy_timer_start);

void klasy_timer_start_by(struct klasy_aspect *a, struct klasy_map_desc *d,
			  const struct klasy_key *k)
{
	__klasy_timer_start(a, d, k);
}
EXPORT_SYMBOL_GPL(klasy_timer_start_by);

static void klasy_time(u64 v, u64 *sum, u64 *min, u64 *max, u64 *b, bool first)
{
	*sum += v;
	if (first || v < *min)
		*min = v;
	if (first || v > *max)
		*max = v;
	b[klasy_log2_bucket(min_t(u64, v, S64_MAX))]++;
}

/* A keyed timer's STOP: the times under the START's key. */
static void klasy_timer_stop_by(struct klasy_aspect *a, struct klasy_map *m,
				const struct klasy_key *k, u64 wall, u64 cpu)
{
	struct klasy_tmap *t = klasy_here(a->agg, m) + klasy_tmap_off(m);
	struct klasy_tentry *e = NULL;
	struct klasy_timer *te;
	bool fresh;

	if (k->nw <= KLASY_KEY_WORDS)
		e = klasy_tfind(t, m, k, &fresh);
	if (!e) {
		t->dropped++;
		return;
	}
	te = (struct klasy_timer *)e->b;
	klasy_time(wall, &te->wall_sum, &te->wall_min, &te->wall_max,
		   te->wall_b, !te->count);
	klasy_time(cpu, &te->cpu_sum, &te->cpu_min, &te->cpu_max, te->cpu_b,
		   !te->count);
	WRITE_ONCE(te->count, te->count + 1);
	if (fresh) {
		/* Pairs with klasy_show_by's acquire: key and times are there. */
		smp_store_release(&e->n, 1);
	} else {
		WRITE_ONCE(e->n, e->n + 1);
	}
}

void klasy_timer_stop(struct klasy_aspect *a, struct klasy_map_desc *d)
{
	struct klasy_map *m = klasy_map_of(a, d);
	struct klasy_key key = {};
	struct klasy_tslot *s;
	struct klasy_timer *t;
	u64 wall, cpu;

	if (unlikely(!m))
		return;
	t = klasy_here(a->agg, m);
	s = klasy_tslot(m, false, NULL);
	if (!s || !s->depth || s->birth != current->start_time) {
		if (s)	/* an exited task's, whose task_struct is ours now */
			smp_store_release(&s->task, 0);
		t->no_start++;
		return;
	}
	if (--s->depth)
		return;
	wall = ktime_get_mono_fast_ns() - s->wall0;
	cpu = klasy_task_cpu_ns() - s->cpu0;
	if (m->by)	/* before the slot is free for another task */
		key = m->tkeys[s - m->tasks];
	/* Pairs with klasy_tslot's claim (0 -> me): the slot is done with. */
	smp_store_release(&s->task, 0);
	/* Two clocks: the task cannot have run longer than the wall time. */
	if ((s64)cpu < 0)
		cpu = 0;
	cpu = min(cpu, wall);
	if (m->by) {
		klasy_timer_stop_by(a, m, &key, wall, cpu);
		return;
	}
	klasy_time(wall, &t->wall_sum, &t->wall_min, &t->wall_max, t->wall_b,
		   !t->count);
	klasy_time(cpu, &t->cpu_sum, &t->cpu_min, &t->cpu_max, t->cpu_b,
		   !t->count);
	WRITE_ONCE(t->count, t->count + 1);
}
EXPORT_SYMBOL_GPL(klasy_timer_stop);

/* The stats file. */

static const char *const klasy_kind_names[] = {
	[KLASY_AGG_COUNT] = "count",
	[KLASY_AGG_SUM] = "sum",
	[KLASY_AGG_MIN] = "min",
	[KLASY_AGG_MAX] = "max",
	[KLASY_AGG_HIST] = "hist",
	[KLASY_AGG_LHIST] = "lhist",
	[KLASY_AGG_TIMER] = "timer",
};

static const char *klasy_kind_name(u8 kind)
{
	if (kind < ARRAY_SIZE(klasy_kind_names) && klasy_kind_names[kind])
		return klasy_kind_names[kind];
	return "unknown";
}

/* The advice number of a use in klasy_advice_N, else 0. */
static unsigned int klasy_advice_of(const struct klasy_map_desc *d)
{
	size_t n = d->func ? str_has_prefix(d->func, "klasy_advice_") : 0;
	unsigned int adv;

	if (!n || kstrtouint(d->func + n, 10, &adv))
		return 0;
	return adv;
}

/* " kind=K name=N advice=A file=F line=L" of use d. */
static void klasy_show_use(struct seq_file *sf, const struct klasy_map_desc *d)
{
	seq_printf(sf, " kind=%s name=", klasy_kind_name(d->kind));
	klasy_put_token(sf, d->name);
	seq_printf(sf, " advice=%u file=", klasy_advice_of(d));
	klasy_put_token(sf, d->file);
	seq_printf(sf, " line=%u", d->line);
	/* Only stacks say: the line of an integer-keyed map is as it was. */
	if (d->keykind == KLASY_KEY_KSTACK)
		seq_puts(sf, " key=kstack");
}

static int klasy_kentry_cmp(const void *a, const void *b)
{
	const struct klasy_kentry *x = a, *y = b;

	return x->key < y->key ? -1 : x->key > y->key;
}

/* A keyed map: the keys of all CPUs, merged and sorted by key. */
static int klasy_show_keyed(struct seq_file *sf, struct klasy_agg *g,
			    struct klasy_map *m)
{
	struct klasy_kentry *all, *e;
	size_t n = 0, keys = 0, i;
	u64 dropped = 0;
	int cpu;

	all = kvmalloc_array(array_size(num_possible_cpus(), KLASY_AGG_KEYS),
			     sizeof(*all), GFP_KERNEL);
	if (!all)
		return -ENOMEM;
	for_each_possible_cpu(cpu) {
		struct klasy_keyed *t = g->cpu[cpu] + m->off;

		dropped += READ_ONCE(t->dropped);
		for (i = 0; i < KLASY_AGG_KEYS; i++) {
			/* Pairs with klasy_agg_keyed's release. */
			u64 cnt = smp_load_acquire(&t->e[i].n);

			if (!cnt)
				continue;
			all[n].key = t->e[i].key;
			all[n].val = READ_ONCE(t->e[i].val);
			all[n].n = cnt;
			n++;
		}
	}
	sort(all, n, sizeof(*all), klasy_kentry_cmp, NULL);
	for (i = 0; i < n; i++) {
		if (!keys || all[keys - 1].key != all[i].key) {
			all[keys++] = all[i];
			continue;
		}
		e = &all[keys - 1];
		e->n += all[i].n;
		switch (m->kind) {
		case KLASY_AGG_SUM:
			e->val += all[i].val;
			break;
		case KLASY_AGG_MIN:
			e->val = min(e->val, all[i].val);
			break;
		case KLASY_AGG_MAX:
			e->val = max(e->val, all[i].val);
			break;
		}
	}
	seq_printf(sf, " keys=%zu dropped=%llu\n", keys, dropped);
	for (i = 0; i < keys; i++)
		seq_printf(sf, "key k=%llu n=%llu v=%lld\n", all[i].key,
			   all[i].n, all[i].val);
	kvfree(all);
	return 0;
}

static int klasy_key_cmp(const void *a, const void *b)
{
	const struct klasy_tentry *x = *(const struct klasy_tentry **)a;
	const struct klasy_tentry *y = *(const struct klasy_tentry **)b;

	if (x->key.nw != y->key.nw)
		return x->key.nw < y->key.nw ? -1 : 1;
	if (x->key.typed != y->key.typed)
		return x->key.typed < y->key.typed ? -1 : 1;
	return memcmp(x->key.w, y->key.w, x->key.nw * sizeof(x->key.w[0]));
}

/* A timer's counts of tm into sum, its times when it has any. */
static void klasy_timer_add(struct klasy_timer *sum, const struct klasy_timer *tm)
{
	u64 n = READ_ONCE(tm->count);
	unsigned int i;

	sum->no_start += READ_ONCE(tm->no_start);
	sum->dropped += READ_ONCE(tm->dropped);
	sum->nested += READ_ONCE(tm->nested);
	sum->orphaned += READ_ONCE(tm->orphaned);
	if (!n)
		return;
	sum->wall_min = !sum->count ? tm->wall_min : min(sum->wall_min, tm->wall_min);
	sum->cpu_min = !sum->count ? tm->cpu_min : min(sum->cpu_min, tm->cpu_min);
	sum->wall_max = max(sum->wall_max, tm->wall_max);
	sum->cpu_max = max(sum->cpu_max, tm->cpu_max);
	sum->count += n;
	sum->wall_sum += READ_ONCE(tm->wall_sum);
	sum->cpu_sum += READ_ONCE(tm->cpu_sum);
	for (i = 0; i < KLASY_AGG_HIST_BUCKETS; i++) {
		sum->wall_b[i] += READ_ONCE(tm->wall_b[i]);
		sum->cpu_b[i] += READ_ONCE(tm->cpu_b[i]);
	}
}

/* The tasks inside timer m now. */
static unsigned int klasy_timer_inside(const struct klasy_map *m)
{
	unsigned int i, inside = 0;

	for (i = 0; i < KLASY_AGG_TASKS; i++)
		inside += !!READ_ONCE(m->tasks[i].task);
	return inside;
}

/* A keyed timer's counts that have no key, on its map line. */
static void klasy_show_timer_counts(struct seq_file *sf, struct klasy_agg *g,
				    struct klasy_map *m)
{
	struct klasy_timer sum = {};
	int cpu;

	for_each_possible_cpu(cpu)
		klasy_timer_add(&sum, g->cpu[cpu] + m->off);
	seq_printf(sf, " no_start=%llu starts_dropped=%llu nested=%llu orphaned=%llu inside=%u buckets=%u",
		   sum.no_start, sum.dropped, sum.nested, sum.orphaned,
		   klasy_timer_inside(m), KLASY_AGG_HIST_BUCKETS);
}

/* The rest of a keyed timer's tkey line: its n entries merged. */
static void klasy_show_timer_key(struct seq_file *sf, struct klasy_tentry **e,
				 size_t n)
{
	struct klasy_timer sum = {};
	unsigned int i;

	while (n--)
		klasy_timer_add(&sum, (struct klasy_timer *)e[n]->b);
	seq_printf(sf, " wall_sum=%llu wall_min=%llu wall_max=%llu cpu_sum=%llu cpu_min=%llu cpu_max=%llu\n",
		   sum.wall_sum, sum.wall_min, sum.wall_max, sum.cpu_sum,
		   sum.cpu_min, sum.cpu_max);
	for (i = 0; i < KLASY_AGG_HIST_BUCKETS; i++)
		if (sum.wall_b[i])
			seq_printf(sf, "w i=%u n=%llu\n", i, sum.wall_b[i]);
	for (i = 0; i < KLASY_AGG_HIST_BUCKETS; i++)
		if (sum.cpu_b[i])
			seq_printf(sf, "c i=%u n=%llu\n", i, sum.cpu_b[i]);
}

/*
 * A _BY map: the keys of all CPUs merged, in key order, each as a tkey
 * line (t= its typed bitmap in hex, w= its words in hex), a histogram's
 * followed by its buckets.
 */
static int klasy_show_by(struct seq_file *sf, struct klasy_agg *g,
			 struct klasy_map *m)
{
	bool hist = m->kind == KLASY_AGG_HIST || m->kind == KLASY_AGG_LHIST;
	unsigned int nkeys = klasy_by_keys(m->kind), i, j, w, bk;
	size_t esize = klasy_tentry_size(m->kind, m->nbuckets);
	struct klasy_tentry **all;
	size_t n = 0, keys = 0;
	u64 dropped = 0, *sum = NULL;
	int cpu;

	all = kvmalloc_array(array_size(num_possible_cpus(), nkeys),
			     sizeof(*all), GFP_KERNEL);
	if (hist)
		sum = kvmalloc_array(m->nbuckets, sizeof(*sum), GFP_KERNEL);
	if (!all || (hist && !sum)) {
		kvfree(all);
		kvfree(sum);
		return -ENOMEM;
	}
	for_each_possible_cpu(cpu) {
		struct klasy_tmap *t = g->cpu[cpu] + m->off + klasy_tmap_off(m);

		dropped += READ_ONCE(t->dropped);
		for (i = 0; i < nkeys; i++) {
			struct klasy_tentry *e = klasy_tentry_at(t, esize, i);

			/* Pairs with klasy_agg_by's and klasy_timer_stop_by's release. */
			if (smp_load_acquire(&e->n))
				all[n++] = e;
		}
	}
	sort(all, n, sizeof(*all), klasy_key_cmp, NULL);
	for (i = 0; i < n; i = j)
		for (keys++, j = i + 1; j < n && !klasy_key_cmp(&all[i], &all[j]);)
			j++;
	if (m->kind == KLASY_AGG_LHIST)
		seq_printf(sf, " lo=%lld hi=%lld step=%lld", m->desc->lo,
			   m->desc->hi, m->desc->step);
	seq_printf(sf, " by=1 keys=%zu dropped=%llu", keys, dropped);
	if (hist)
		seq_printf(sf, " buckets=%u", m->nbuckets);
	if (m->kind == KLASY_AGG_TIMER)
		klasy_show_timer_counts(sf, g, m);
	seq_putc(sf, '\n');
	for (i = 0; i < n; i = j) {
		u64 cnt = 0;
		s64 v = 0;

		if (hist)
			memset(sum, 0, m->nbuckets * sizeof(*sum));
		for (j = i; j < n && !klasy_key_cmp(&all[i], &all[j]); j++) {
			struct klasy_tentry *e = all[j];
			s64 ev = READ_ONCE(e->val);

			if (j == i)
				v = ev;
			else if (m->kind == KLASY_AGG_SUM)
				v += ev;
			else if (m->kind == KLASY_AGG_MIN)
				v = min(v, ev);
			else if (m->kind == KLASY_AGG_MAX)
				v = max(v, ev);
			cnt += READ_ONCE(e->n);
			for (bk = 0; hist && bk < m->nbuckets; bk++)
				sum[bk] += READ_ONCE(e->b[bk]);
		}
		if (hist)
			v = 0;
		seq_printf(sf, "tkey t=0x%x w=", all[i]->key.typed);
		for (w = 0; w < all[i]->key.nw; w++)
			seq_printf(sf, "%s%llx", w ? "," : "", all[i]->key.w[w]);
		seq_printf(sf, " n=%llu v=%lld", cnt, v);
		if (m->kind == KLASY_AGG_TIMER) {
			klasy_show_timer_key(sf, all + i, j - i);
			continue;
		}
		seq_putc(sf, '\n');
		for (bk = 0; hist && bk < m->nbuckets; bk++)
			if (sum[bk])
				seq_printf(sf, "b i=%u n=%llu\n", bk, sum[bk]);
	}
	kvfree(sum);
	kvfree(all);
	return 0;
}

/* Buckets of b (at off in each CPU's arena) summed over CPUs, as TAG lines. */
static void klasy_show_buckets(struct seq_file *sf, struct klasy_agg *g,
			       size_t off, unsigned int nb, const char *tag)
{
	unsigned int i;
	u64 n;
	int cpu;

	for (i = 0; i < nb; i++) {
		n = 0;
		for_each_possible_cpu(cpu)
			n += READ_ONCE(((u64 *)(g->cpu[cpu] + off))[i]);
		if (n)
			seq_printf(sf, "%s i=%u n=%llu\n", tag, i, n);
	}
}

static void klasy_show_hist(struct seq_file *sf, struct klasy_agg *g,
			    struct klasy_map *m)
{
	u64 count = 0;
	int cpu;

	for_each_possible_cpu(cpu)
		count += READ_ONCE(((struct klasy_hist *)(g->cpu[cpu] + m->off))->count);
	if (m->kind == KLASY_AGG_LHIST)
		seq_printf(sf, " lo=%lld hi=%lld step=%lld", m->desc->lo,
			   m->desc->hi, m->desc->step);
	seq_printf(sf, " count=%llu buckets=%u\n", count, m->nbuckets);
	klasy_show_buckets(sf, g, m->off + offsetof(struct klasy_hist, b),
			   m->nbuckets, "b");
}

static void klasy_show_timer(struct seq_file *sf, struct klasy_agg *g,
			     struct klasy_map *m)
{
	struct klasy_timer sum = {};
	unsigned int i, inside = 0;
	bool first = true;
	int cpu;

	for_each_possible_cpu(cpu) {
		struct klasy_timer *t = g->cpu[cpu] + m->off;
		u64 n = READ_ONCE(t->count);

		sum.no_start += READ_ONCE(t->no_start);
		sum.dropped += READ_ONCE(t->dropped);
		sum.nested += READ_ONCE(t->nested);
		sum.orphaned += READ_ONCE(t->orphaned);
		if (!n)
			continue;
		sum.count += n;
		sum.wall_sum += READ_ONCE(t->wall_sum);
		sum.cpu_sum += READ_ONCE(t->cpu_sum);
		sum.wall_min = first ? t->wall_min : min(sum.wall_min, t->wall_min);
		sum.cpu_min = first ? t->cpu_min : min(sum.cpu_min, t->cpu_min);
		sum.wall_max = max(sum.wall_max, t->wall_max);
		sum.cpu_max = max(sum.cpu_max, t->cpu_max);
		first = false;
	}
	for (i = 0; i < KLASY_AGG_TASKS; i++)
		inside += !!READ_ONCE(m->tasks[i].task);
	seq_printf(sf, " count=%llu wall_sum=%llu wall_min=%llu wall_max=%llu cpu_sum=%llu cpu_min=%llu cpu_max=%llu no_start=%llu dropped=%llu nested=%llu orphaned=%llu inside=%u buckets=%u\n",
		   sum.count, sum.wall_sum, sum.wall_min, sum.wall_max,
		   sum.cpu_sum, sum.cpu_min, sum.cpu_max, sum.no_start,
		   sum.dropped, sum.nested, sum.orphaned, inside,
		   KLASY_AGG_HIST_BUCKETS);
	klasy_show_buckets(sf, g, m->off + offsetof(struct klasy_timer, wall_b),
			   KLASY_AGG_HIST_BUCKETS, "w");
	klasy_show_buckets(sf, g, m->off + offsetof(struct klasy_timer, cpu_b),
			   KLASY_AGG_HIST_BUCKETS, "c");
}

static int klasy_show_aspect(struct seq_file *sf, struct klasy_aspect *a)
{
	struct klasy_agg *g = a->agg;
	/* Pairs with klasy_new_map's release. */
	unsigned int i, nmaps = smp_load_acquire(&g->nmaps);
	/* Pairs with klasy_make_map's release. */
	unsigned int nfails = smp_load_acquire(&g->nfails);
	u64 unclaimed = 0;
	int cpu, err;

	for_each_possible_cpu(cpu)
		unclaimed += *per_cpu_ptr(g->unclaimed, cpu);
	seq_printf(sf, "aspect id=%u name=", a->id);
	klasy_put_token(sf, a->name);
	seq_printf(sf, " maps=%u room=%u unclaimed=%llu failed=%u\n", nmaps,
		   g->maxmaps, unclaimed, READ_ONCE(g->nfailed));
	for (i = 0; i < nmaps; i++) {
		struct klasy_map *m = &g->maps[i];

		seq_printf(sf, "map index=%u", i);
		klasy_show_use(sf, m->desc);
		if (m->by) {
			err = klasy_show_by(sf, g, m);
			if (err)
				return err;
			continue;
		}
		switch (m->kind) {
		case KLASY_AGG_HIST:
		case KLASY_AGG_LHIST:
			klasy_show_hist(sf, g, m);
			break;
		case KLASY_AGG_TIMER:
			klasy_show_timer(sf, g, m);
			break;
		default:
			err = klasy_show_keyed(sf, g, m);
			if (err)
				return err;
		}
	}
	for (i = 0; i < nfails; i++) {
		seq_puts(sf, "fail");
		klasy_show_use(sf, g->fails[i].desc);
		seq_printf(sf, " reason=%s with=%d\n", g->fails[i].reason,
			   g->fails[i].with);
	}
	return klasy_smap_show(sf, a);
}

/*
 * The stats of every aspect, in the order status lists them. The aspects
 * cannot go away meanwhile (klasy_aspects_mutex); their maps keep being
 * updated, each counter read whole.
 */
static int klasy_stats_show(struct seq_file *sf, void *unused)
{
	struct klasy_aspect *a;
	int err = 0;

	seq_printf(sf, "stats abi=%d cpus=%u\n", KLASY_ABI_VERSION, nr_cpu_ids);
	mutex_lock(&klasy_aspects_mutex);
	list_for_each_entry(a, &klasy_aspects, node) {
		err = klasy_show_aspect(sf, a);
		if (err)
			break;
	}
	mutex_unlock(&klasy_aspects_mutex);
	return err;
}
DEFINE_SHOW_ATTRIBUTE(klasy_stats);

void klasy_agg_debugfs(struct dentry *dir)
{
	debugfs_create_file("stats", 0444, dir, NULL, &klasy_stats_fops);
}
