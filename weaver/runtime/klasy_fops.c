// SPDX-License-Identifier: GPL-2.0
//go:build ignore

/*
 * klasy_fops.c - an aspect's entry hooks on one ftrace_ops of its own.
 *
 * A before hook at a function's ftrace call site is, as a kprobe, one
 * ftrace code update to register (enable_kprobe: a walk of every ftrace
 * record, twice) and per hit the kprobes machinery on top of ftrace's
 * (a lookup, current_kprobe, regs->ip fixed up and back). Here all of an
 * aspect's such hooks go into the filter of one ftrace_ops
 * (ftrace_set_filter_ips) registered once: one code update for them all,
 * and one unregister_ftrace_function to take them out. The handler finds
 * the hook by the call site's address and runs its kprobe pre handler
 * with the registers ftrace saved (FTRACE_OPS_FL_SAVE_REGS: the advice
 * gets the context it gets on a kprobe on ftrace, the same pt_regs).
 *
 * Which hooks: KLASY_HOOK_KPROBE without a post handler at a symbol's
 * first byte that ftrace has a record for. A replacement stays a kprobe
 * (it needs kprobes' IPMODIFY arming and chain rules), as does any hook
 * elsewhere. When ftrace refuses the ops, those hooks are kprobes, and
 * the aspect's status line says why (ops_err).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/ftrace.h>
#include <linux/kallsyms.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/sort.h>
#include <linux/string.h>

#include "klasy_internal.h"

static bool ftrace_ops = true;
module_param(ftrace_ops, bool, 0644);
MODULE_PARM_DESC(ftrace_ops, "put entry hooks at ftrace sites on an ftrace_ops of their aspect (default 1); 0: kprobes");

bool klasy_fops_on(void)
{
	return IS_ENABLED(CONFIG_DYNAMIC_FTRACE_WITH_REGS) && READ_ONCE(ftrace_ops);
}

/* A candidate: a before hook whose address is a symbol's first byte. */
static bool klasy_fops_candidate(const struct klasy_hook *h)
{
	char sym[KSYM_SYMBOL_LEN];

	if (h->kind != KLASY_HOOK_KPROBE || h->rp.kp.post_handler ||
	    !h->rp.kp.pre_handler)
		return false;
	/* func+0x0/0x9a [mod]: kallsyms' own test of a function's entry. */
	sprint_symbol(sym, (unsigned long)h->rp.kp.addr);
	return strstr(sym, "+0x0/");
}

#ifdef CONFIG_DYNAMIC_FTRACE_WITH_REGS

struct klasy_fops {
	struct ftrace_ops ops;
	bool armed;		/* the aspect's hooks are all in */
	unsigned int n;
	unsigned long *ips;	/* ascending */
	struct klasy_hook **hooks;	/* hooks[i] is at ips[i] */
};

/* The hook at ip: a binary search, no call the handler could recurse on. */
static __always_inline struct klasy_hook *klasy_fops_find(struct klasy_fops *f,
							  unsigned long ip)
{
	unsigned int lo = 0, hi = f->n, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (f->ips[mid] == ip)
			return f->hooks[mid];
		if (f->ips[mid] < ip)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/*
 * What ftrace calls at each site of the filter. Without
 * FTRACE_OPS_FL_RECURSION ftrace leaves recursion to us: a hit that the
 * trylock refuses (the handler's own calls reaching a hooked function in
 * the same context, a second time) is counted as missed, where kprobes'
 * ftrace handler drops it uncounted. The trylock also keeps preemption
 * off until the unlock: the advice's per-CPU state stays on this CPU.
 */
static void notrace klasy_fops_handler(unsigned long ip, unsigned long parent_ip,
				       struct ftrace_ops *op,
				       struct ftrace_regs *fregs)
{
	struct klasy_fops *f = container_of(op, struct klasy_fops, ops);
	struct klasy_hook *h = klasy_fops_find(f, ip);
	struct pt_regs *regs = ftrace_get_regs(fregs);
	int bit;

	if (unlikely(!h || !READ_ONCE(f->armed)))
		return;
	bit = ftrace_test_recursion_trylock(ip, parent_ip);
	if (unlikely(bit < 0 || !regs)) {
		atomic_long_inc(&h->missed);
		if (bit >= 0)
			ftrace_test_recursion_unlock(bit);
		return;
	}
	h->rp.kp.pre_handler(&h->rp.kp, regs);
	ftrace_test_recursion_unlock(bit);
}

static int klasy_cmp_hook(const void *x, const void *y)
{
	unsigned long a = (unsigned long)(*(struct klasy_hook *const *)x)->rp.kp.addr;
	unsigned long b = (unsigned long)(*(struct klasy_hook *const *)y)->rp.kp.addr;

	return a < b ? -1 : a > b;
}

static void klasy_fops_free(struct klasy_fops *f)
{
	kfree(f->ips);
	kfree(f->hooks);
	kfree(f);
}

/*
 * klasy_fops_attach puts a's entry hooks on an ftrace_ops, registered but
 * not armed, and marks them on_ops; the others stay for kprobes. Only
 * running out of memory is an error: when ftrace refuses, a->fops_err
 * says why and every hook stays a kprobe.
 */
int klasy_fops_attach(struct klasy_aspect *a)
{
	struct klasy_fops *f;
	unsigned int i, n = 0, k;
	int err;

	a->fops = NULL;
	a->fops_err = 0;
	if (!klasy_fops_on())
		return 0;
	if (IS_ENABLED(CONFIG_X86_KERNEL_IBT)) {
		/*
		 * ftrace's site is then past the endbr at a function's first
		 * byte, where the hook is: the handler would not find it.
		 */
		for (i = 0; i < a->nhooks; i++)
			if (klasy_fops_candidate(&a->hooks[i]))
				a->fops_err = -EOPNOTSUPP;
		return 0;
	}
	f = kzalloc(sizeof(*f), GFP_KERNEL);
	if (f) {
		f->hooks = kcalloc(a->nhooks, sizeof(*f->hooks), GFP_KERNEL);
		f->ips = kcalloc(a->nhooks, sizeof(*f->ips), GFP_KERNEL);
	}
	if (!f || !f->hooks || !f->ips) {
		if (f)
			klasy_fops_free(f);
		return -ENOMEM;
	}
	for (i = 0; i < a->nhooks; i++)
		if (klasy_fops_candidate(&a->hooks[i]))
			f->hooks[n++] = &a->hooks[i];
	if (!n) {
		klasy_fops_free(f);
		return 0;
	}
	sort(f->hooks, n, sizeof(*f->hooks), klasy_cmp_hook, NULL);
	for (i = 0; i < n; i++)
		f->ips[i] = (unsigned long)f->hooks[i]->rp.kp.addr;
	f->ops.func = klasy_fops_handler;
	f->ops.flags = FTRACE_OPS_FL_SAVE_REGS;

	err = ftrace_set_filter_ips(&f->ops, f->ips, n, 0, 1);
	if (err == -EINVAL) {
		/*
		 * An entry without an ftrace record (notrace, or no fentry):
		 * find which one by one and leave those to kprobes.
		 */
		ftrace_free_filter(&f->ops);
		for (i = 0, k = 0; i < n; i++) {
			if (!ftrace_set_filter_ip(&f->ops, f->ips[i], 0, 0)) {
				f->ips[k] = f->ips[i];
				f->hooks[k++] = f->hooks[i];
			}
		}
		n = k;
		err = n ? 0 : -EINVAL;
	}
	if (!err) {
		f->n = n;
		err = register_ftrace_function(&f->ops);
	}
	if (err) {
		pr_info("aspect %s: ftrace refused an ftrace_ops for %u entry hooks (error %d): kprobes instead\n",
			a->name, n, err);
		ftrace_free_filter(&f->ops);
		klasy_fops_free(f);
		/* No entry was an ftrace site: nothing was refused. */
		a->fops_err = err == -EINVAL && !n ? 0 : err;
		return 0;
	}
	for (i = 0; i < n; i++)
		f->hooks[i]->on_ops = true;
	a->fops = f;
	return 0;
}

/* Lets a's hooks on the ops run their advice. */
void klasy_fops_arm(struct klasy_aspect *a)
{
	if (a->fops)
		WRITE_ONCE(a->fops->armed, true);
}

void klasy_fops_disarm(struct klasy_aspect *a)
{
	if (a->fops)
		WRITE_ONCE(a->fops->armed, false);
}

/*
 * Takes the ops out. unregister_ftrace_function returns once no CPU and
 * no preempted task can be in the handler (ftrace's shutdown of a
 * dynamic ops waits for RCU tasks), so the hooks and this module's text
 * may go after it.
 */
void klasy_fops_detach(struct klasy_aspect *a)
{
	struct klasy_fops *f = a->fops;
	unsigned int i;
	int err;

	if (!f)
		return;
	err = unregister_ftrace_function(&f->ops);
	WARN_ONCE(err, "aspect %s: unregister_ftrace_function: %d\n", a->name, err);
	ftrace_free_filter(&f->ops);
	for (i = 0; i < f->n; i++)
		f->hooks[i]->on_ops = false;
	klasy_fops_free(f);
	a->fops = NULL;
}

unsigned int klasy_fops_count(const struct klasy_aspect *a)
{
	return a->fops ? a->fops->n : 0;
}

#else /* !CONFIG_DYNAMIC_FTRACE_WITH_REGS */

/* A kernel without ftrace's register saving: every hook is a kprobe. */
int klasy_fops_attach(struct klasy_aspect *a)
{
	unsigned int i;

	a->fops = NULL;
	a->fops_err = 0;
	for (i = 0; i < a->nhooks; i++)
		if (klasy_fops_candidate(&a->hooks[i]) && READ_ONCE(ftrace_ops))
			a->fops_err = -EOPNOTSUPP;
	return 0;
}

void klasy_fops_arm(struct klasy_aspect *a)
{
}

void klasy_fops_disarm(struct klasy_aspect *a)
{
}

void klasy_fops_detach(struct klasy_aspect *a)
{
}

unsigned int klasy_fops_count(const struct klasy_aspect *a)
{
	return 0;
}

#endif
