/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The flow table of the klasy runtime: for each flow (an
 * <xflow> of an aspect), which object carries which flow ID.
 *
 * Structure. A table is two fixed arrays of 2^bits buckets (the runtime's
 * flow_bits), each bucket a raw spinlock (taken in handlers and with
 * interrupts off: it must not sleep on PREEMPT_RT) and an RCU hlist, as the kernel's
 * own hashtables are built: entries by the object's address (hash_ptr),
 * and the same entries by their ID turned right by the domain bits (the
 * counter's low bits: a domain's IDs spread over every bucket, however
 * many domains). Lookups walk one
 * bucket under rcu_read_lock() and take no lock at all; register and
 * remove lock the object's bucket (irqsave), and, inside it, the ID
 * buckets of the entries they link and unlink (in index order when two).
 * Entries are freed after a grace period (kfree_rcu). rhashtable would
 * resize, but it has no user-space
 * counterpart to test and measure the same source with; an RCU hlist
 * needs only a few lines of stand-ins (testdata/flow/flow_user.h).
 *
 * IDs. klasy_flow_new_id() counts up one atomic counter per runtime and
 * puts the domain's number in the low bits: ID = counter << dbits |
 * domain, dbits = order_base_2(domains), both module parameters the host
 * sets per domain of a weave (flow_domain, flow_domains). IDs of two
 * domains thus differ in their low bits, which an ID cut to fit a header
 * keeps (xin_* store the low bits first), so a truncated ID never equals
 * one the receiving domain made itself. 0 is never an ID. The counter
 * goes round after 2^(32 - dbits) IDs; from then on an ID registered in
 * a table of this runtime is passed over (counted: debugfs
 * klasy/flow_ids), so a start never gives such an ID to a second object.
 * An ID taken and not registered yet, or live only in another domain's
 * tables, is not seen and may be given again.
 *
 * Truncation. Before xin_* cut an ID to the bits its fields hold, the
 * translated advice calls truncate_flowid(): the table looks for a live
 * entry (in this table, in this domain) whose ID differs but has the same
 * low bits - the ID index puts all of them in one bucket when bits >=
 * flow_bits + dbits - and counts the truncation as ambiguous if there is
 * one. An ID moved to another domain is no longer live here, so what is
 * counted is a lower bound: the receiver cannot tell such IDs apart. A
 * narrower field spreads them over 2^(flow_bits + dbits - bits) buckets
 * (all of them for bits <= dbits), of which KLASY_FLOW_TRUNC_BUCKETS at
 * most are looked at (the work of a handler must be bounded, in NMI too):
 * a lower bound again.
 *
 * Stale entries. An object freed without reaching <quit> must neither
 * stay forever nor lend its ID to the next object at its address. Two
 * mechanisms: (1) a hook on the free - the kernel's kfree and
 * kmem_cache_free tracepoints and a kprobe on kmem_cache_free_bulk remove
 * the entry of any object freed to the slab allocator (counted as freed);
 * (2) a bound - a bucket holds at most KLASY_FLOW_BUCKET_MAX entries, and
 * registering one more evicts the bucket's oldest (counted as evictions),
 * so a table never holds more than 2^bits * KLASY_FLOW_BUCKET_MAX entries,
 * whatever escapes the hook: objects inside another allocation (the
 * second skb of a fast clone), objects recycled by a cache of their own
 * without a free (the NAPI skb cache until it flushes), memory not from
 * the slab. Such an object keeps its ID until it is registered again,
 * removed, or evicted: write <quit> for those paths.
 *
 * Contexts. Lookups, truncate_flowid and get_new_flowid run anywhere.
 * Register and remove run in any context too, NMI included: since 5.8,
 * x86 runs the handler of a kprobe that is not jump-optimized (an int3)
 * inside irqentry_nmi_enter(), so in_nmi() is true there, and neither
 * kmalloc, kfree_rcu nor a spinning lock is allowed; and on PREEMPT_RT no
 * handler may allocate (the slab's locks sleep there). So the table uses
 * the kernel's NMI-safe machinery, as the BPF ring buffer and BPF's
 * memory allocator do:
 *   - entries come from a per-CPU pool of each table, in every context:
 *     an llist of KLASY_FLOW_POOL preallocated entries; llist_add is safe
 *     anywhere and llist_del_first with one consumer, which the CPU's own
 *     register is (klasy's handlers never nest on a CPU: klasy_enter
 *     counts one that would as missed; nothing outside it takes from the
 *     pool). Below half full, an irq_work (irq_work_queue is NMI-safe)
 *     refills the pool with GFP_ATOMIC once interrupts are on again (on
 *     PREEMPT_RT in the CPU's irq_work thread, where the slab may be
 *     used).
 *   - in NMI locks are only tried: raw_spin_trylock, KLASY_FLOW_NMI_TRIES
 *     times; and an unlinked entry goes, in every context, on the CPU's
 *     dead llist, which the irq_work hands to kfree_rcu: kfree_rcu takes
 *     a lock of its own and may queue work or start a timer, which a
 *     handler's CPU may be holding the locks of.
 * Re-entry. The free hook is a tracepoint: it runs outside kprobe
 * context, where kprobes' nesting guard (current_kprobe, not exported to
 * modules) is not set, so a klasy hook on a function it calls with a
 * bucket lock held, such as _raw_spin_lock, runs its advice there. A
 * per-CPU depth marks the table's locked sections (interrupts off): an
 * operation that starts inside one on the same CPU only tries its locks,
 * as in NMI, and never waits for one its own CPU holds.
 * Counted as dropped (status: dropped=), the operation not done: a
 * register that finds the pool empty, and a register or remove in NMI or
 * nested as above that finds a lock taken (by the CPU it interrupted, or
 * too long by another). The free hook's removal is the same operation
 * and is counted the same way.
 *
 * This header and klasy_flow.c are compiled into klasy_runtime.ko and,
 * without __KERNEL__, into the user-space harness of the Go tests and
 * benchmark (weaver/runtime/flow_test.go).
 */
#ifndef _KLASY_FLOW_H
#define _KLASY_FLOW_H

#ifdef __KERNEL__
#include <linux/atomic.h>
#include <linux/hash.h>
#include <linux/irq_work.h>
#include <linux/list.h>
#include <linux/llist.h>
#include <linux/percpu.h>
#include <linux/rculist.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include "klasy_rt.h"
#else
#include "flow_user.h"		/* kernel primitives in user space */
#include "klasy_flow_abi.h"	/* klasy_rt.h's plain-C flow section */
#endif

/* A flow's name: a C identifier of at most this many bytes, NUL included. */
#define KLASY_FLOW_NAME_MAX 64

/* The bound: entries per bucket, the oldest evicted past it. */
#define KLASY_FLOW_BUCKET_MAX 16

/* Buckets per table: 2^flow_bits. */
#define KLASY_FLOW_BITS_MIN 1
#define KLASY_FLOW_BITS_MAX 20
#define KLASY_FLOW_BITS_DEFAULT 12

/* Domains one weave may have: the ID's low 8 bits at most. */
#define KLASY_FLOW_DOMAINS_MAX 256

/* Entries in each CPU's pool for NMI context; refilled below half. */
#define KLASY_FLOW_POOL 64

/* Times NMI context tries a lock before it drops the operation. */
#define KLASY_FLOW_NMI_TRIES 64

/* IDs get_new_flowid() passes over as live before it gives up: see IDs. */
#define KLASY_FLOW_ID_TRIES 16

/* ID buckets truncate_flowid() looks at, at most: see Truncation. */
#define KLASY_FLOW_TRUNC_BUCKETS 64U

struct klasy_flow_entry {
	struct hlist_node node;		/* in objs[hash_ptr(obj)] */
	struct hlist_node id_node;	/* in ids[id & mask] */
	const void *obj;
	u32 id;				/* never changes: a new ID, a new entry */
	union {
		struct rcu_head rcu;	/* unlinked, waiting for readers */
		struct llist_node lnode; /* in a pool, or dead in NMI */
	};
};

/* Each CPU's entries for NMI context: see Contexts above. */
struct klasy_flow_pool {
	struct llist_head free;		/* ready: NMI context takes them */
	atomic_t n;			/* about how many are in free */
	struct llist_head dead;		/* unlinked: to kfree_rcu, by work */
	struct irq_work work;		/* refills free, drains dead */
};

struct klasy_flow_bucket {
	raw_spinlock_t lock;
	unsigned int n;			/* entries (objs only) */
	struct hlist_head head;
};

/* Counted per CPU. */
struct klasy_flow_stats {
	u64 hits;		/* lookups that found an ID */
	u64 misses;		/* lookups that found none */
	u64 evictions;		/* entries pushed out by the bound */
	u64 freed;		/* entries removed because their object was freed */
	u64 ambiguous;		/* truncations sharing kept bits with a live ID */
	u64 dropped;		/* registers and removes not done: see Contexts */
	u64 noid;		/* xout_* that found no ID in the header */
};

struct klasy_flow {
	char name[KLASY_FLOW_NAME_MAX];
	unsigned int bits;
	struct klasy_flow_bucket *objs;	/* 2^bits, by object */
	struct klasy_flow_bucket *ids;	/* 2^bits, by ID */
	struct klasy_flow_stats __percpu *stats;
	struct klasy_flow_pool __percpu *pool;

	/* klasy_flow_kernel.c's: the runtime's list of flows */
	struct list_head node;
	unsigned int refs;
};

/* What status shows of one flow. */
struct klasy_flow_counts {
	u64 entries;
	u64 limit;		/* 2^bits * KLASY_FLOW_BUCKET_MAX */
	struct klasy_flow_stats sum;
};

/* Sets how IDs are made: see "IDs" above. 0 or -EINVAL. */
int klasy_flow_setup_ids(unsigned int domain, unsigned int domains);

/* What klasy_flow_new_id() counted since klasy_flow_setup_ids(). */
struct klasy_flow_id_counts {
	unsigned int wraps;	/* times the counter went round */
	unsigned int skipped;	/* IDs passed over: live in a table */
	unsigned int none;	/* calls that found no free ID: 0 given */
};

void klasy_flow_read_ids(struct klasy_flow_id_counts *c);

/* Whether an entry of f carries id (under RCU, no lock). */
bool klasy_flow_id_live(struct klasy_flow *f, u32 id);

/*
 * Whether any flow table of the runtime has an entry carrying id: the
 * runtime's list of flows in the kernel (klasy_flow_kernel.c), the
 * harness's tables in user space. Any context.
 */
bool klasy_flows_id_live(u32 id);

/*
 * Allocates f's buckets, counters and pools (may sleep). klasy_flow_destroy
 * frees them and every entry left, after the pools' irq_works are done;
 * no one may use f any more, and a grace period has passed since anyone
 * did.
 */
int klasy_flow_init(struct klasy_flow *f, const char *name, unsigned int bits);
void klasy_flow_destroy(struct klasy_flow *f);

/*
 * The free hook's part: obj is being freed; drop its entry, counted as
 * freed. True if it had one.
 */
bool klasy_flow_forget(struct klasy_flow *f, const void *obj);

void klasy_flow_read(struct klasy_flow *f, struct klasy_flow_counts *c);

#ifdef __KERNEL__
struct dentry;
struct seq_file;

/* klasy_flow_kernel.c, for the runtime's init, exit and status. */
int klasy_flows_init(void);
void klasy_flows_exit(void);
void klasy_flows_show(struct seq_file *m);
/* klasy/flow_ids: "wraps=N skipped=N none=N" (struct klasy_flow_id_counts). */
void klasy_flows_debugfs(struct dentry *dir);
#endif

#endif /* _KLASY_FLOW_H */
