// SPDX-License-Identifier: GPL-2.0
/*
 * flow_user.c - the user-space stand-ins of flow_user.h that are not
 * inline: per-thread "CPUs" and the deferred frees of kfree_rcu.
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
