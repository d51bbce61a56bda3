// SPDX-License-Identifier: GPL-2.0
//go:build ignore

/*
 * An aspect's entry hooks on one ftrace_ops of its own.
 *
 * A before hook at a function's ftrace call site is, as a kprobe, one
 * ftrace code update to register (enable_kprobe: a walk of every ftrace
 * record, twice) and per hit the kprobes machinery on top of ftrace's
 * (a lookup, current_kprobe, regs->ip fixed up and back). Here all of an
 * aspect's such hooks go into the filter of one ftrace_ops
 * (ftrace_set_filter_ips) registered once: one code update for them all,
 * and one unregister_ftrace_function to take them out. The handler finds
 * the hook by the call site's address and runs its kprobe pre handler
 * with the registers ftrace saved: the advice gets the context it gets on
 * a kprobe on ftrace, the same pt_regs. Only hooks whose handler reads a
 * register beyond the arguments' (args_only false) need ftrace to save
 * all of them (FTRACE_OPS_FL_SAVE_REGS, its slower caller): those go on
 * a second ftrace_ops of the aspect that asks for it.
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

#ifdef CONFIG_DYNAMIC_FTRACE_WITH_REGS

/* A candidate: a before hook whose address is a symbol's first byte. */
static bool klasy_fops_candidate(const struct klasy_hook *h)
{
	char sym[KSYM_SYMBOL_LEN];

	/*
	 * A module's functions stay kprobes: ftrace keeps an unloaded
	 * module's addresses in this filter and enables them on whatever
	 * the next module loads there, where a kprobe is marked gone.
	 */
	if (h->kind != KLASY_HOOK_KPROBE || h->rp.kp.post_handler ||
	    !h->rp.kp.pre_handler || h->module)
		return false;
	/* func+0x0/0x9a [mod]: kallsyms' own test of a function's entry. */
	sprint_symbol(sym, (unsigned long)h->rp.kp.addr);
	return strstr(sym, "+0x0/");
}

/*
 * Whether the aspect also hooks h's function's return with a kretprobe
 * (whose entry kprobe sits on the same ftrace site). Such a function's
 * before hook stays a kprobe, as it was before this ops: once in the lab,
 * a task asleep in such a function (hrtimer_nanosleep) while the aspect
 * was unwoven returned to address 0; not understood yet, so not risked.
 * A return on the direct trampoline (klasy_direct.c, attached first) is
 * no kretprobe: the before hook goes on the ops beside it.
 */
static bool klasy_fops_returns_too(const struct klasy_aspect *a,
				   const struct klasy_hook *h)
{
	unsigned int i;

	for (i = 0; i < a->nhooks; i++)
		if (a->hooks[i].kind == KLASY_HOOK_KRETPROBE &&
		    !a->hooks[i].on_ops &&
		    a->hooks[i].rp.kp.addr == h->rp.kp.addr)
			return true;
	return false;
}

/* One ftrace_ops and its hooks. */
struct klasy_ops_set {
	struct ftrace_ops ops;
	bool armed;		/* the aspect's hooks are all in */
	bool registered;
	unsigned int n;
	unsigned long *ips;	/* ascending */
	struct klasy_hook **hooks;	/* hooks[i] is at ips[i] */
};

/* An aspect's: [0] with only the arguments' registers, [1] SAVE_REGS. */
struct klasy_fops {
	struct klasy_ops_set set[2];
};

/*
 * Whether h can go on the ops without SAVE_REGS: its handler reads only
 * the registers ftrace saves for a function's arguments, and ftrace
 * hands such an ops a pt_regs at all (DYNAMIC_FTRACE_WITH_ARGS, which
 * x86-64 has; without it the ops gets no registers).
 */
static bool klasy_args_only(const struct klasy_hook *h)
{
	return IS_ENABLED(CONFIG_DYNAMIC_FTRACE_WITH_ARGS) && h->args_only;
}

/*
 * What ftrace calls at each site of the filter. ftrace's recursion lock
 * (ftrace_test_recursion_trylock, or FTRACE_OPS_FL_RECURSION) is not
 * taken: it was a fifth of a null advice's cost, and klasy_enter's busy
 * flag, the first thing every advice handler tests, already refuses a
 * second klasy handler on this CPU (the advice's own calls reaching a
 * hooked function, an interrupt) and counts the hit as missed. Nothing
 * before that test can recurse: this handler and rcu_is_watching are
 * notrace, the lookup is inline, and the task filter calls nothing
 * (taskfilter). Preemption stays off from here to the advice's end, so
 * the per-CPU flag and state stay on this CPU.
 */
static void notrace klasy_fops_handler(unsigned long ip, unsigned long parent_ip,
				       struct ftrace_ops *op,
				       struct ftrace_regs *fregs)
{
	struct klasy_ops_set *f = container_of(op, struct klasy_ops_set, ops);
	/*
	 * ftrace calls an ops only at the sites of its filter: with one,
	 * that is the hook, no search needed.
	 */
	struct klasy_hook *h = likely(f->n == 1) ? f->hooks[0] :
				 klasy_hook_search(f->ips, f->hooks, f->n, ip);
	/*
	 * Without SAVE_REGS, x86's ftrace_regs is a pt_regs whose argument
	 * registers, bp, sp and ip are filled (ftrace_caller); args_only
	 * hooks read no other.
	 */
	struct pt_regs *regs = ftrace_get_regs(fregs) ?: &fregs->regs;

	if (unlikely(!h || !READ_ONCE(f->armed)))
		return;
	preempt_disable_notrace();
	/*
	 * Not FTRACE_OPS_FL_RCU: ftrace calls us from idle paths too, where
	 * advice's rcu_read_lock (the flow table) would not be waited for.
	 */
	if (likely(rcu_is_watching()))
		h->rp.kp.pre_handler(&h->rp.kp, regs);
	else
		atomic_long_inc(&h->missed);
	preempt_enable_notrace();
}

static unsigned int klasy_fops_count_of(const struct klasy_fops *f)
{
	return f->set[0].n + f->set[1].n;
}

static int klasy_cmp_hook(const void *x, const void *y)
{
	unsigned long a = (unsigned long)(*(struct klasy_hook *const *)x)->rp.kp.addr;
	unsigned long b = (unsigned long)(*(struct klasy_hook *const *)y)->rp.kp.addr;

	return a < b ? -1 : a > b;
}

static void klasy_fops_free(struct klasy_fops *f)
{
	unsigned int k;

	for (k = 0; k < ARRAY_SIZE(f->set); k++) {
		kfree(f->set[k].ips);
		kfree(f->set[k].hooks);
	}
	kfree(f);
}

/*
 * Puts the candidates in f's filter and registers it: 0, or ftrace's
 * error. The candidates ftrace has no record for (notrace, no fentry)
 * are dropped from f, left to kprobes.
 */
static int klasy_ops_set_register(struct klasy_ops_set *f, unsigned long flags)
{
	unsigned int i, k, n = f->n;
	int err;

	if (!n)
		return 0;
	sort(f->hooks, n, sizeof(*f->hooks), klasy_cmp_hook, NULL);
	for (i = 0; i < n; i++)
		f->ips[i] = (unsigned long)f->hooks[i]->rp.kp.addr;
	f->ops.func = klasy_fops_handler;
	f->ops.flags = flags;

	err = ftrace_set_filter_ips(&f->ops, f->ips, n, 0, 1);
	if (err == -EINVAL) {
		/* Which entries have no ftrace record, one by one. */
		ftrace_free_filter(&f->ops);
		for (i = 0, k = 0; i < n; i++) {
			if (!ftrace_set_filter_ip(&f->ops, f->ips[i], 0, 0)) {
				f->ips[k] = f->ips[i];
				f->hooks[k++] = f->hooks[i];
			}
		}
		n = k;
		f->n = n;
		err = 0;
	}
	/* An empty filter would trace every function. */
	if (!err && n)
		err = register_ftrace_function(&f->ops);
	if (err || !n) {
		ftrace_free_filter(&f->ops);
		f->n = 0;
		return err;
	}
	f->registered = true;
	return 0;
}

/*
 * Takes one ops out: false when ftrace could not (it is disabled after
 * an error of its own), which leaves the ops linked: it must not be freed.
 */
static bool klasy_ops_set_unregister(struct klasy_aspect *a,
				     struct klasy_ops_set *f)
{
	unsigned int i;
	int err;

	if (!f->registered)
		return true;
	err = unregister_ftrace_function(&f->ops);
	if (WARN_ONCE(err, "aspect %s: unregister_ftrace_function: %d\n", a->name, err))
		return false;
	ftrace_free_filter(&f->ops);
	f->registered = false;
	for (i = 0; i < f->n; i++)
		f->hooks[i]->on_ops = false;
	return true;
}

/* Frees f once both its ops are out; leaks it (said) when one is not. */
static void klasy_fops_release(struct klasy_aspect *a, struct klasy_fops *f)
{
	bool out = true;
	unsigned int k;

	for (k = 0; k < ARRAY_SIZE(f->set); k++)
		out &= klasy_ops_set_unregister(a, &f->set[k]);
	if (out)
		klasy_fops_free(f);
	else
		pr_err("aspect %s: an ftrace_ops still linked is left allocated\n", a->name);
}

/*
 * klasy_fops_attach puts a's entry hooks on its ftrace_ops, registered but
 * not armed, and marks them on_ops; the others stay for kprobes. Only
 * running out of memory is an error: when ftrace refuses, a->fops_err
 * says why and every hook stays a kprobe.
 */
int klasy_fops_attach(struct klasy_aspect *a)
{
	static const unsigned long flags[] = { 0, FTRACE_OPS_FL_SAVE_REGS };
	struct klasy_fops *f;
	unsigned int i, k;
	int err = 0;

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
	for (k = 0; f && k < ARRAY_SIZE(f->set); k++) {
		f->set[k].hooks = kcalloc(a->nhooks, sizeof(*f->set[k].hooks), GFP_KERNEL);
		f->set[k].ips = kcalloc(a->nhooks, sizeof(*f->set[k].ips), GFP_KERNEL);
		if (!f->set[k].hooks || !f->set[k].ips)
			err = -ENOMEM;
	}
	if (!f || err) {
		if (f)
			klasy_fops_free(f);
		return -ENOMEM;
	}
	for (i = 0; i < a->nhooks; i++) {
		struct klasy_hook *h = &a->hooks[i];
		struct klasy_ops_set *set = &f->set[klasy_args_only(h) ? 0 : 1];

		if (klasy_fops_candidate(h) && !klasy_fops_returns_too(a, h))
			set->hooks[set->n++] = h;
	}
	for (k = 0; k < ARRAY_SIZE(f->set) && !err; k++)
		err = klasy_ops_set_register(&f->set[k], flags[k]);
	if (err) {
		pr_info("aspect %s: ftrace refused an ftrace_ops for its entry hooks (error %d): kprobes instead\n",
			a->name, err);
		klasy_fops_release(a, f);
		a->fops_err = err;
		return 0;
	}
	if (!klasy_fops_count_of(f)) {
		klasy_fops_free(f);	/* no entry at an ftrace site */
		return 0;
	}
	for (k = 0; k < ARRAY_SIZE(f->set); k++)
		for (i = 0; i < f->set[k].n; i++)
			f->set[k].hooks[i]->on_ops = true;
	a->fops = f;
	return 0;
}

/* Lets a's hooks on the ops run their advice. */
static void klasy_fops_set_armed(struct klasy_aspect *a, bool armed)
{
	unsigned int k;

	for (k = 0; a->fops && k < ARRAY_SIZE(a->fops->set); k++)
		WRITE_ONCE(a->fops->set[k].armed, armed);
}

void klasy_fops_arm(struct klasy_aspect *a)
{
	klasy_fops_set_armed(a, true);
}

void klasy_fops_disarm(struct klasy_aspect *a)
{
	klasy_fops_set_armed(a, false);
}

/*
 * Takes the ops out. unregister_ftrace_function returns once no CPU and
 * no preempted task can be in the handler (ftrace's shutdown of a
 * dynamic ops waits for RCU tasks), so the hooks and this module's text
 * may go after it.
 */
void klasy_fops_detach(struct klasy_aspect *a)
{
	if (!a->fops)
		return;
	klasy_fops_release(a, a->fops);
	a->fops = NULL;
}

unsigned int klasy_fops_count(const struct klasy_aspect *a)
{
	return a->fops ? klasy_fops_count_of(a->fops) : 0;
}

#else /* !CONFIG_DYNAMIC_FTRACE_WITH_REGS */

/*
 * A kernel without ftrace's register saving (the built lab kernel has no
 * ftrace at all): every hook is a kprobe, and status says ftrace_ops=0.
 */
int klasy_fops_attach(struct klasy_aspect *a)
{
	a->fops = NULL;
	a->fops_err = 0;
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
