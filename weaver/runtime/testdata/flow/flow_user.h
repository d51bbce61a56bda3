/* SPDX-License-Identifier: GPL-2.0 */
/*
 * flow_user.h - the kernel primitives klasy_flow.c uses, in user space,
 * so that the same source runs in the harness of flow_test.go:
 *
 *   raw_spinlock_t    a pthread spinlock; irqsave saves nothing
 *   hlist + RCU       the kernel's algorithms (include/linux/list.h,
 *                     rculist.h), every store a reader may see a C11
 *                     atomic store, rcu_dereference an acquire load
 *   rcu_read_lock     nothing, as in a non-preemptible kernel
 *   kfree_rcu         queued per thread, freed by klasy_user_quiescent(),
 *                     which the harness calls only when every thread
 *                     waits at a barrier: a grace period by construction
 *   per-CPU data      one copy per thread (at most KLASY_USER_CPUS), at a
 *                     fixed stride, addressed as the kernel does
 *   atomic_t          GCC's __atomic builtins
 *   in_nmi()          a thread-local the harness sets (klasy_user_in_nmi)
 *   llist             include/linux/llist.h's algorithms on __atomic
 *   irq_work          queued on the thread that queues it, run by
 *                     klasy_user_irq_work_run() on that thread, which the
 *                     harness calls when the thread leaves "NMI" and
 *                     after each operation outside it, as the kernel
 *                     runs it once interrupts are on again
 *
 * ThreadSanitizer understands all of it.
 */
#ifndef _FLOW_USER_H
#define _FLOW_USER_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
typedef int64_t s64;

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define READ_ONCE(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define WRITE_ONCE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
#define min(a, b) ((a) < (b) ? (a) : (b))
#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))

#define EXPORT_SYMBOL_GPL(sym)
#define __percpu
extern __thread bool klasy_user_in_nmi;
#define in_nmi() klasy_user_in_nmi
#define cpu_relax() __builtin_ia32_pause()
#define swap(a, b) do { __typeof__(a) __t = (a); (a) = (b); (b) = __t; } while (0)
#define lockdep_is_held(l) 1

/* Memory. */
#define GFP_KERNEL 0
#define GFP_ATOMIC 0
#define __GFP_NOWARN 0
#define kmalloc(size, gfp) malloc(size)
#define kvcalloc(n, size, gfp) calloc((n), (size))
#define kfree(p) free((void *)(p))
#define kvfree(p) free(p)

static inline ssize_t strscpy(char *dst, const char *src, size_t n)
{
	size_t len = strnlen(src, n);

	if (len == n) {
		if (n)
			dst[n - 1] = '\0';
		return -E2BIG;
	}
	memcpy(dst, src, len + 1);
	return (ssize_t)len;
}

static inline unsigned int order_base_2(unsigned int n)
{
	return n > 1 ? 32 - __builtin_clz(n - 1) : 0;
}

/* include/linux/hash.h, hash_64_generic on 64 bits. */
#define GOLDEN_RATIO_64 0x61C8864680B583EBull
static inline u32 hash_ptr(const void *ptr, unsigned int bits)
{
	return (u32)((u64)(uintptr_t)ptr * GOLDEN_RATIO_64 >> (64 - bits));
}

/* include/linux/bitops.h */
static inline u32 ror32(u32 word, unsigned int shift)
{
	return (word >> (shift & 31)) | (word << ((-shift) & 31));
}

/* Atomics. */
typedef struct {
	int counter;
} atomic_t;
#define ATOMIC_INIT(i) { (i) }
#define atomic_set(v, i) __atomic_store_n(&(v)->counter, (i), __ATOMIC_SEQ_CST)
#define atomic_inc_return(v) __atomic_add_fetch(&(v)->counter, 1, __ATOMIC_SEQ_CST)
#define atomic_read(v) __atomic_load_n(&(v)->counter, __ATOMIC_RELAXED)
#define atomic_inc(v) ((void)__atomic_add_fetch(&(v)->counter, 1, __ATOMIC_SEQ_CST))
#define atomic_dec(v) ((void)__atomic_sub_fetch(&(v)->counter, 1, __ATOMIC_SEQ_CST))
typedef struct {
	long long counter;
} atomic64_t;
#define ATOMIC64_INIT(i) { (i) }
#define atomic64_set(v, i) __atomic_store_n(&(v)->counter, (i), __ATOMIC_SEQ_CST)
#define atomic64_read(v) __atomic_load_n(&(v)->counter, __ATOMIC_RELAXED)
/*
 * The harness may run something right after an increment that returns
 * (klasy_user_after_inc: another CPU's code between two steps).
 */
void klasy_user_after_inc(void);
#define atomic64_inc_return(v) \
	({ long long __v = __atomic_add_fetch(&(v)->counter, 1, __ATOMIC_SEQ_CST); \
	   klasy_user_after_inc(); __v; })

/*
 * Locks. Before each lock or try the harness may run something on this
 * thread (klasy_user_on_lock: a hook on the kernel's _raw_spin_lock, whose
 * advice runs there, inside whatever section the caller is in).
 */
typedef pthread_spinlock_t raw_spinlock_t;
void klasy_user_on_lock(void);
#define raw_spin_lock_init(l) pthread_spin_init((l), PTHREAD_PROCESS_PRIVATE)
#define raw_spin_lock(l) (klasy_user_on_lock(), pthread_spin_lock(l))
#define SINGLE_DEPTH_NESTING 1
#define raw_spin_lock_nested(l, subclass) raw_spin_lock(l)
#define raw_spin_unlock(l) pthread_spin_unlock(l)
#define raw_spin_trylock(l) (klasy_user_on_lock(), pthread_spin_trylock(l) == 0)
#define local_irq_save(flags) ((flags) = 0)
#define local_irq_restore(flags) ((void)(flags))

/* RCU. */
struct rcu_head {
	struct rcu_head *next;
	void *obj;
};
#define rcu_read_lock() __atomic_signal_fence(__ATOMIC_SEQ_CST)
#define rcu_read_unlock() __atomic_signal_fence(__ATOMIC_SEQ_CST)
#define rcu_dereference(p) __atomic_load_n(&(p), __ATOMIC_ACQUIRE)
#define rcu_assign_pointer(p, v) __atomic_store_n(&(p), (v), __ATOMIC_RELEASE)
void klasy_user_kfree_rcu(void *obj, struct rcu_head *head);
#define kfree_rcu(p, field) klasy_user_kfree_rcu((p), &(p)->field)
/* Frees what kfree_rcu queued; no thread may be inside a lookup. */
void klasy_user_quiescent(void);

/* hlist, as include/linux/list.h and rculist.h. */
struct hlist_head {
	struct hlist_node *first;
};
struct hlist_node {
	struct hlist_node *next, **pprev;
};
#define INIT_HLIST_HEAD(h) ((h)->first = NULL)
#define hlist_entry(ptr, type, member) container_of(ptr, type, member)
#define hlist_entry_safe(ptr, type, member) \
	({ __typeof__(ptr) ____ptr = (ptr); \
	   ____ptr ? hlist_entry(____ptr, type, member) : NULL; })
#define LIST_POISON2 ((void *)0x122)

static inline void hlist_add_head_rcu(struct hlist_node *n, struct hlist_head *h)
{
	struct hlist_node *first = h->first;

	n->next = first;
	WRITE_ONCE(n->pprev, &h->first);
	rcu_assign_pointer(h->first, n);
	if (first)
		WRITE_ONCE(first->pprev, &n->next);
}

static inline void hlist_del_rcu(struct hlist_node *n)
{
	struct hlist_node *next = n->next;
	struct hlist_node **pprev = n->pprev;

	WRITE_ONCE(*pprev, next);
	if (next)
		WRITE_ONCE(next->pprev, pprev);
	WRITE_ONCE(n->pprev, (struct hlist_node **)LIST_POISON2);
}

static inline void hlist_replace_rcu(struct hlist_node *old, struct hlist_node *new)
{
	struct hlist_node *next = old->next;

	new->next = next;
	WRITE_ONCE(new->pprev, old->pprev);
	rcu_assign_pointer(*new->pprev, new);
	if (next)
		WRITE_ONCE(new->next->pprev, &new->next);
	WRITE_ONCE(old->pprev, (struct hlist_node **)LIST_POISON2);
}

#define hlist_for_each_entry(pos, head, member) \
	for (pos = hlist_entry_safe((head)->first, __typeof__(*(pos)), member); pos; \
	     pos = hlist_entry_safe((pos)->member.next, __typeof__(*(pos)), member))

#define hlist_for_each_entry_safe(pos, n, head, member) \
	for (pos = hlist_entry_safe((head)->first, __typeof__(*pos), member); \
	     pos && ({ n = pos->member.next; 1; }); \
	     pos = hlist_entry_safe(n, __typeof__(*pos), member))

#define hlist_for_each_entry_rcu(pos, head, member, cond...) \
	for (pos = hlist_entry_safe(rcu_dereference((head)->first), __typeof__(*(pos)), member); \
	     pos; \
	     pos = hlist_entry_safe(rcu_dereference((pos)->member.next), __typeof__(*(pos)), member))

/* llist, as include/linux/llist.h and lib/llist.c. */
struct llist_head {
	struct llist_node *first;
};
struct llist_node {
	struct llist_node *next;
};
#define init_llist_head(h) __atomic_store_n(&(h)->first, NULL, __ATOMIC_RELAXED)
#define llist_entry(ptr, type, member) container_of(ptr, type, member)
/*
 * As the kernel's, node evaluated once; NULL-safe without the kernel's
 * container_of(NULL) arithmetic, which UBSan refuses.
 */
#define llist_entry_safe(ptr, type, member) \
	({ __typeof__(ptr) ____ptr = (ptr); \
	   ____ptr ? llist_entry(____ptr, type, member) : NULL; })
#define llist_for_each_entry_safe(pos, n, node, member) \
	for (pos = llist_entry_safe((node), __typeof__(*pos), member); \
	     pos && (n = llist_entry_safe(pos->member.next, __typeof__(*n), member), true); \
	     pos = n)

static inline bool llist_add(struct llist_node *new, struct llist_head *head)
{
	struct llist_node *first = __atomic_load_n(&head->first, __ATOMIC_RELAXED);

	do {
		new->next = first;
	} while (!__atomic_compare_exchange_n(&head->first, &first, new, false,
					      __ATOMIC_RELEASE, __ATOMIC_RELAXED));
	return !first;
}

/* One consumer at a time, as the kernel's. */
static inline struct llist_node *llist_del_first(struct llist_head *head)
{
	struct llist_node *entry = __atomic_load_n(&head->first, __ATOMIC_ACQUIRE), *next;

	do {
		if (!entry)
			return NULL;
		next = __atomic_load_n(&entry->next, __ATOMIC_RELAXED);
	} while (!__atomic_compare_exchange_n(&head->first, &entry, next, false,
					      __ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE));
	return entry;
}

static inline struct llist_node *llist_del_all(struct llist_head *head)
{
	return __atomic_exchange_n(&head->first, NULL, __ATOMIC_ACQUIRE);
}

/* irq_work: see the top. */
struct irq_work {
	void (*func)(struct irq_work *);
	bool pending;		/* under flow_user.c's lock */
	int cpu;		/* the thread that queued it */
	struct irq_work *next;
};
#define init_irq_work(w, f) (*(w) = (struct irq_work){ .func = (f) })
bool irq_work_queue(struct irq_work *w);
/* Runs w now if it is queued: after it, as in the kernel, w has run. */
void irq_work_sync(struct irq_work *w);
/* Runs the works this thread queued: its "NMI" is over. */
void klasy_user_irq_work_run(void);

/* list_head, only as a member of struct klasy_flow. */
struct list_head {
	struct list_head *next, *prev;
};

/* Per-CPU data: one copy per thread. */
#define DEFINE_PER_CPU(type, name) __thread type name
#define __this_cpu_read(x) (x)
#define __this_cpu_inc(x) ((x)++)
#define __this_cpu_dec(x) ((x)--)
#define KLASY_USER_CPUS 64
#define KLASY_USER_PCPU_STRIDE 128
int klasy_user_cpu(void);
void *klasy_user_alloc_percpu(size_t size);
#define alloc_percpu(type) ((type *)klasy_user_alloc_percpu(sizeof(type)))
#define free_percpu(p) free(p)
#define per_cpu_ptr(p, cpu) \
	((__typeof__(p))((char *)(p) + (size_t)(cpu) * KLASY_USER_PCPU_STRIDE))
#define for_each_possible_cpu(cpu) for ((cpu) = 0; (cpu) < KLASY_USER_CPUS; (cpu)++)
#define this_cpu_ptr(p) per_cpu_ptr(p, klasy_user_cpu())
/* Only the thread that owns a copy writes it; status reads it. */
#define this_cpu_inc(x) do { \
	__typeof__(&(x)) __p = (__typeof__(&(x)))((char *)&(x) + \
		(size_t)klasy_user_cpu() * KLASY_USER_PCPU_STRIDE); \
	__atomic_store_n(__p, __atomic_load_n(__p, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED); \
} while (0)

#endif /* _FLOW_USER_H */
