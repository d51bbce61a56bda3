// SPDX-License-Identifier: GPL-2.0
/*
 * flow_user.c - the user-space stand-ins of flow_user.h that are not
 * inline: per-thread "CPUs", the deferred frees of kfree_rcu, "NMI" and
 * irq_work.
 */
#include "flow_user.h"

static int klasy_user_ncpus;
static __thread int klasy_user_my_cpu = -1;

/*
 * The kfree_rcu()s of each "CPU", written only by its thread, each on a
 * cache line of its own, as the kernel's per-CPU batches are.
 */
static struct {
	_Alignas(64) struct rcu_head *head;
} klasy_user_queues[KLASY_USER_CPUS];

int klasy_user_cpu(void)
{
	if (klasy_user_my_cpu < 0) {
		klasy_user_my_cpu = __atomic_fetch_add(&klasy_user_ncpus, 1, __ATOMIC_RELAXED);
		if (klasy_user_my_cpu >= KLASY_USER_CPUS) {
			fprintf(stderr, "flow_user: more than %d threads\n", KLASY_USER_CPUS);
			abort();
		}
	}
	return klasy_user_my_cpu;
}

void *klasy_user_alloc_percpu(size_t size)
{
	void *p;

	if (size > KLASY_USER_PCPU_STRIDE)
		abort();
	p = aligned_alloc(64, (size_t)KLASY_USER_CPUS * KLASY_USER_PCPU_STRIDE);
	if (p)
		memset(p, 0, (size_t)KLASY_USER_CPUS * KLASY_USER_PCPU_STRIDE);
	return p;
}

void klasy_user_kfree_rcu(void *obj, struct rcu_head *head)
{
	struct rcu_head **q = &klasy_user_queues[klasy_user_cpu()].head;

	head->obj = obj;
	head->next = *q;
	*q = head;
}

void klasy_user_quiescent(void)
{
	struct rcu_head *h, *next;
	int i;

	for (i = 0; i < KLASY_USER_CPUS; i++) {
		for (h = klasy_user_queues[i].head; h; h = next) {
			next = h->next;
			free(h->obj);
		}
		klasy_user_queues[i].head = NULL;
	}
}

__thread bool klasy_user_in_nmi;

/* Queued irq_works of every thread: a stand-in, so a plain lock. */
static pthread_mutex_t klasy_user_irq_lock = PTHREAD_MUTEX_INITIALIZER;
static struct irq_work *klasy_user_irq_works;

/* Works this thread queued since it last ran them: a fast path. */
static __thread int klasy_user_irq_queued;

bool irq_work_queue(struct irq_work *w)
{
	bool queued = false;

	klasy_user_irq_queued++;

	pthread_mutex_lock(&klasy_user_irq_lock);
	if (!w->pending) {
		w->pending = true;
		w->cpu = klasy_user_cpu();
		w->next = klasy_user_irq_works;
		klasy_user_irq_works = w;
		queued = true;
	}
	pthread_mutex_unlock(&klasy_user_irq_lock);
	return queued;
}

/* Takes w, or this thread's works if w is NULL, off the queue. */
static struct irq_work *klasy_user_irq_take(struct irq_work *w)
{
	struct irq_work **p, *x, *taken = NULL;
	int cpu = klasy_user_cpu();

	pthread_mutex_lock(&klasy_user_irq_lock);
	for (p = &klasy_user_irq_works; (x = *p);) {
		if (w ? x == w : x->cpu == cpu) {
			*p = x->next;
			x->pending = false;	/* before it runs, as the kernel */
			x->next = taken;
			taken = x;
		} else {
			p = &x->next;
		}
	}
	pthread_mutex_unlock(&klasy_user_irq_lock);
	return taken;
}

static void klasy_user_irq_run(struct irq_work *x)
{
	struct irq_work *next;

	for (; x; x = next) {
		next = x->next;
		x->func(x);
	}
}

void irq_work_sync(struct irq_work *w)
{
	klasy_user_irq_run(klasy_user_irq_take(w));
}

void klasy_user_irq_work_run(void)
{
	if (!klasy_user_irq_queued)
		return;
	klasy_user_irq_queued = 0;
	klasy_user_irq_run(klasy_user_irq_take(NULL));
}
