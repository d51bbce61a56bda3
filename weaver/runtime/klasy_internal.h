/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the runtime module's own files share. Advice
 * modules never see it: their ABI with the runtime is klasy_rt.h.
 */
#ifndef _KLASY_INTERNAL_H
#define _KLASY_INTERNAL_H

#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/seq_file.h>

#include "klasy_rt.h"

struct dentry;

/* klasy_core.c: the registered aspects, in registration order. */
extern struct list_head klasy_aspects;
extern struct mutex klasy_aspects_mutex;

/*
 * klasy_read_str copies the string at p (kernel or user memory by kind)
 * into buf, which holds cap + 1 bytes, without faulting, and returns the
 * bytes to keep: with its NUL when the whole string fit in cap, cap (no
 * NUL) when it did not, 0 when p cannot be read.
 */
long klasy_read_str(char *buf, u32 kind, const void *p, long cap);

/* Prints s as one token of a debugfs line: "-" when empty, blanks as '_'. */
void klasy_put_token(struct seq_file *m, const char *s);

/*
 * klasy_agg.c: an aspect's aggregation maps, allocated when it registers
 * (before any hook is enabled) and freed once none of its handlers runs;
 * the stats file in dir.
 */
int klasy_agg_alloc(struct klasy_aspect *a);
void klasy_agg_free(struct klasy_aspect *a);
void klasy_agg_debugfs(struct dentry *dir);

/*
 * klasy_smap.c: an aspect's shared maps, allocated and freed with its
 * aggregation maps; klasy_smap_show prints them in the stats file.
 * klasy_key_eq (klasy_agg.c): two _BY keys are the same.
 */
int klasy_smap_alloc(struct klasy_aspect *a);
void klasy_smap_free(struct klasy_aspect *a);
int klasy_smap_show(struct seq_file *sf, struct klasy_aspect *a);
bool klasy_key_eq(const struct klasy_key *x, const struct klasy_key *y);

/* klasy_stack.c: the table of stacks and its file in dir. */
int klasy_stack_init(struct dentry *dir);
void klasy_stack_exit(void);

/*
 * klasy_fops.c: an aspect's entry hooks on one ftrace_ops. attach picks
 * them (marking them on_ops) and registers the ops unarmed, before any
 * kprobe of the aspect; arm lets their advice run once every hook is in;
 * detach unregisters it (waiting for running handlers). klasy_fops_on:
 * the kernel has it and the ftrace_ops parameter is on.
 */
bool klasy_fops_on(void);
int klasy_fops_attach(struct klasy_aspect *a);
void klasy_fops_arm(struct klasy_aspect *a);
void klasy_fops_disarm(struct klasy_aspect *a);
void klasy_fops_detach(struct klasy_aspect *a);
unsigned int klasy_fops_count(const struct klasy_aspect *a);

/*
 * klasy_direct.c: an aspect's after hooks at ftrace sites on a direct
 * trampoline, fexit-style. Used as klasy_fops_*: attach before any kprobe,
 * arm once all are in; detach takes the ops out without waiting for
 * calls inside a hooked function: those hold the set and this module until
 * they return. klasy_direct_is: h is on it. klasy_direct_held: unwoven
 * sets some call is still inside.
 */
bool klasy_direct_on(void);
int klasy_direct_attach(struct klasy_aspect *a);
void klasy_direct_arm(struct klasy_aspect *a);
void klasy_direct_disarm(struct klasy_aspect *a);
void klasy_direct_detach(struct klasy_aspect *a);
unsigned int klasy_direct_count(const struct klasy_aspect *a);
bool klasy_direct_is(const struct klasy_hook *h);
unsigned int klasy_direct_held(void);
void klasy_direct_exit_module(void);

/*
 * klasy_tp.c: a tracepoint hook in (which enables it) and out; klasy_tp_sync
 * waits for the probes of a taken out since the last call.
 */
int klasy_tp_register(struct klasy_hook *h);
void klasy_tp_unregister(struct klasy_hook *h);
void klasy_tp_sync(struct klasy_aspect *a);

/*
 * The hook at ip among n hooks at ascending ips (hooks[i] at ips[i]), or
 * NULL: a binary search that calls nothing, for handlers a call could
 * recurse through (klasy_fops.c, klasy_direct.c).
 */
static __always_inline struct klasy_hook *
klasy_hook_search(const unsigned long *ips, struct klasy_hook *const *hooks,
		  unsigned int n, unsigned long ip)
{
	unsigned int lo = 0, hi = n, mid;

	/* The common case, one hooked function a set: no search. */
	if (likely(n == 1))
		return ips[0] == ip ? hooks[0] : NULL;
	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (ips[mid] == ip)
			return hooks[mid];
		if (ips[mid] < ip)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

#endif /* _KLASY_INTERNAL_H */
