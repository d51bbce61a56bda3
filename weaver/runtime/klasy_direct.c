// SPDX-License-Identifier: GPL-2.0
//go:build ignore

/*
 * An aspect's after hooks at ftrace sites on a direct trampoline, as BPF's
 * fexit: no kretprobe.
 *
 * A kretprobe is a kprobe on the function's ftrace site (full pt_regs,
 * the kprobes lookup) that takes a rethook node and swaps the return
 * address, and a return through rethook's trampoline (another pt_regs).
 * Here the aspect's after hooks go into one ftrace_ops registered with
 * register_ftrace_direct_multi: each site calls klasy_direct_tramp, which
 * saves the registers, runs the hook's entry handler (the values taken at
 * entry), calls the body past the ftrace call, saves the return value,
 * runs the hook's return handler (the after advice with $retval$) and
 * returns to the caller. The handlers are the advice module's kretprobe
 * handlers, given a kretprobe_instance in the trampoline's frame whose
 * data they use as their rethook node's: they get what they get on a
 * kretprobe.
 *
 * Which hooks: a kretprobe hook at a symbol's first byte, not a GCC clone
 * (its arguments may have moved), whose function takes its arguments in
 * registers only and returns in rax (the generator says so:
 * direct_ok; the body is called from the trampoline's frame, so stack
 * arguments would be read from it), in the kernel, with entry data that
 * fits the frame. The others, and all of an aspect's when ftrace refuses
 * the ops (no DIRECT_CALLS; -EBUSY: another direct caller at one of the
 * sites, or an IPMODIFY user such as a livepatch, which 6.1 keeps apart
 * from direct calls), stay kretprobes; status says why (fexit_err).
 *
 * Unweaving while a task is inside a hooked function: its stack holds the
 * trampoline's frame and its return address, and its return runs
 * klasy_direct_exit. As BPF's trampolines (kernel/bpf/trampoline.c,
 * bpf_tramp_image_put), each call through the trampoline holds a
 * percpu_ref of the aspect's set from entry to return, and unweave never
 * waits for it: once the set is disarmed, its ops out and every task past
 * the lookup (RCU tasks, RCU), the advice module may go, as the exit path
 * touches the hook (the advice module's memory) only while armed, with
 * preemption off. The set itself (its ref, its ops) and this module (the
 * trampoline's text, klasy_direct_exit) stay until the last call leaves
 * the trampoline: the ref's release waits for RCU tasks (a task preempted
 * in the trampoline's last instructions) and then drops the module
 * reference unweave took. Unweave waits for that a moment only
 * (KLASY_DIRECT_WAIT), so that the runtime usually goes with the last
 * aspect; a task blocked for good in a hooked function keeps the runtime
 * loaded (status: fexit_held), never unweave waiting.
 *
 * The frame's pt_regs holds the argument registers, bp, sp and ip (and
 * ax at return), the others are not saved: at entry the handlers read
 * the arguments, at return ax, and the unwinder ip, sp and bp (direct_ok
 * says so). ax at entry is no argument: direct_ok functions are not
 * variadic.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/ftrace.h>
#include <linux/kallsyms.h>
#include <linux/kprobes.h>
#include <linux/module.h>
#include <linux/percpu.h>
#include <linux/percpu-refcount.h>
#include <linux/rculist.h>
#include <linux/rcupdate.h>
#include <linux/slab.h>
#include <linux/sort.h>
#include <linux/string.h>
#include <linux/stringify.h>
#include <linux/wait.h>
#include <asm/linkage.h>
#include <asm/unwind_hints.h>

#include "klasy_internal.h"

static bool fexit = true;
module_param(fexit, bool, 0644);
MODULE_PARM_DESC(fexit, "put after hooks at ftrace sites on a direct trampoline (default 1); 0: kretprobes");

bool klasy_direct_on(void)
{
	return IS_ENABLED(CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS) &&
	       IS_ENABLED(CONFIG_X86_64) && !IS_ENABLED(CONFIG_X86_KERNEL_IBT) &&
	       READ_ONCE(fexit);
}

#if defined(CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS) && defined(CONFIG_X86_64) && \
	!defined(CONFIG_X86_KERNEL_IBT)

/* Entry data a hook may keep in the frame: 16 values taken at entry. */
#define KLASY_DIRECT_DATA 128
/* The trampoline's frame below its saved rbp: struct klasy_direct_frame. */
#define KLASY_DIRECT_FRAME 384

struct klasy_direct;

/*
 * What the trampoline keeps on the stack across the call of the body.
 * regs first: the asm stores registers at pt_regs' offsets from rsp.
 */
struct klasy_direct_frame {
	struct pt_regs regs;
	struct klasy_direct *d;
	struct klasy_hook *h;
	/*
	 * The caller's return address as entry saw it: the stack's slot is
	 * what the trampoline returns through, but the advice is told this.
	 */
	unsigned long ret_addr;
	/* A kretprobe_instance whose data the handlers use. */
	char ri[sizeof(struct kretprobe_instance) + KLASY_DIRECT_DATA] __aligned(8);
};

/* Called by the trampoline only. */
asmlinkage int klasy_direct_enter(struct klasy_direct_frame *f);
asmlinkage void klasy_direct_exit(struct klasy_direct_frame *f);

/* One aspect's after hooks on its direct ops. */
struct klasy_direct {
	struct ftrace_ops ops;
	struct percpu_ref inside;	/* one per call in the trampoline */
	struct rcu_head rcu;
	struct list_head node;		/* on klasy_directs, then klasy_held */
	bool armed;			/* advice runs: all hooks in, not unwoven */
	bool gone;			/* no call left, this module's ref dropped */
	unsigned int n;
	unsigned long *ips;		/* ascending */
	struct klasy_hook **hooks;	/* hooks[i] is at ips[i] */
};

/* The sets registered, looked up by call site under RCU. */
static LIST_HEAD(klasy_directs);
/* Unwoven sets some call is still inside, under klasy_directs_mutex. */
static LIST_HEAD(klasy_held);
static DEFINE_MUTEX(klasy_directs_mutex);
static DECLARE_WAIT_QUEUE_HEAD(klasy_direct_wq);
static bool klasy_direct_used;

/* How long unweave waits for the calls inside to leave. */
#define KLASY_DIRECT_WAIT (2 * HZ)

/*
 * pt_regs offsets the asm uses, as asm-offsets would give them (an
 * out-of-tree module has no asm-offsets.c; its .S could not see them
 * either): each checked against the struct when this file builds.
 */
#define KD_BP 32
#define KD_R9 64
#define KD_R8 72
#define KD_AX 80
#define KD_CX 88
#define KD_DX 96
#define KD_SI 104
#define KD_DI 112
#define KD_IP 128
#define KD_SP 152
static_assert(offsetof(struct pt_regs, bp) == KD_BP);
static_assert(offsetof(struct pt_regs, r9) == KD_R9);
static_assert(offsetof(struct pt_regs, r8) == KD_R8);
static_assert(offsetof(struct pt_regs, ax) == KD_AX);
static_assert(offsetof(struct pt_regs, cx) == KD_CX);
static_assert(offsetof(struct pt_regs, dx) == KD_DX);
static_assert(offsetof(struct pt_regs, si) == KD_SI);
static_assert(offsetof(struct pt_regs, di) == KD_DI);
static_assert(offsetof(struct pt_regs, ip) == KD_IP);
static_assert(offsetof(struct pt_regs, sp) == KD_SP);
static_assert(offsetof(struct klasy_direct_frame, regs) == 0);
static_assert(sizeof(struct klasy_direct_frame) <= KLASY_DIRECT_FRAME);

#define KD_S(x) __stringify(x)

#ifdef CONFIG_RETPOLINE
#define KD_CALL_R11 "call __x86_indirect_thunk_r11\n"
#else
#define KD_CALL_R11 ANNOTATE_RETPOLINE_SAFE "call *%r11\n"
#endif

/*
 * The trampoline: called from a function's ftrace site (directly, or
 * through ftrace_regs_caller when other ops share the site), so at entry
 * the stack holds the return address into the function past its ftrace
 * call (f+5), then the caller's return address. With a frame pointer of
 * its own, the unwinder walks from the body through it to f and the
 * caller. After the body it drops f+5 and returns to the caller, as BPF's
 * trampolines do with BPF_TRAMP_F_SKIP_FRAME.
 */
asm(
	".pushsection .text, \"ax\"\n"
	".globl klasy_direct_tramp\n"
	".type klasy_direct_tramp, @function\n"
	"klasy_direct_tramp:\n"
	"	pushq %rbp\n"
	"	movq %rsp, %rbp\n"
	"	subq $" KD_S(KLASY_DIRECT_FRAME) ", %rsp\n"
	"	movq %rdi, " KD_S(KD_DI) "(%rsp)\n"
	"	movq %rsi, " KD_S(KD_SI) "(%rsp)\n"
	"	movq %rdx, " KD_S(KD_DX) "(%rsp)\n"
	"	movq %rcx, " KD_S(KD_CX) "(%rsp)\n"
	"	movq %r8, " KD_S(KD_R8) "(%rsp)\n"
	"	movq %r9, " KD_S(KD_R9) "(%rsp)\n"
	"	movq (%rbp), %rax\n"
	"	movq %rax, " KD_S(KD_BP) "(%rsp)\n"
	"	leaq 16(%rbp), %rax\n"
	"	movq %rax, " KD_S(KD_SP) "(%rsp)\n"
	"	movq 8(%rbp), %rax\n"
	"	movq %rax, " KD_S(KD_IP) "(%rsp)\n"
	"	movq %rsp, %rdi\n"
	"	call klasy_direct_enter\n"
	"	testl %eax, %eax\n"
	"	movq " KD_S(KD_DI) "(%rsp), %rdi\n"
	"	movq " KD_S(KD_SI) "(%rsp), %rsi\n"
	"	movq " KD_S(KD_DX) "(%rsp), %rdx\n"
	"	movq " KD_S(KD_CX) "(%rsp), %rcx\n"
	"	movq " KD_S(KD_R8) "(%rsp), %r8\n"
	"	movq " KD_S(KD_R9) "(%rsp), %r9\n"
	"	jz 1f\n"
	"	movq 8(%rbp), %r11\n"
	"	" KD_CALL_R11
	"	movq %rax, " KD_S(KD_AX) "(%rsp)\n"
	"	movq %rsp, %rdi\n"
	"	call klasy_direct_exit\n"
	"	movq " KD_S(KD_AX) "(%rsp), %rax\n"
	"	leave\n"
	"	addq $8, %rsp\n"
	"	" UNWIND_HINT_FUNC "\n"
	"	" ASM_RET
	/* No after advice for this call: on to the body, as if not called. */
	"1:	leave\n"
	"	" ASM_RET
	".size klasy_direct_tramp, .-klasy_direct_tramp\n"
	".popsection\n"
);
asmlinkage void klasy_direct_tramp(void);
NOKPROBE_SYMBOL(klasy_direct_tramp);

/*
 * percpu_ref_get and _put without their rcu_read_lock: the trampoline's
 * callers have preemption off, which is an RCU read side for the call_rcu
 * that switches a killed ref to atomic. rcu_read_lock would cost a hit
 * two calls of __rcu_read_lock/unlock (PREEMPT_RCU), which are traceable:
 * after advice on them would come back here.
 */
static __always_inline void klasy_ref_get(struct percpu_ref *ref)
{
	unsigned long __percpu *count;

	if (__ref_is_percpu(ref, &count))
		this_cpu_inc(*count);
	else
		atomic_long_inc(&ref->data->count);
}

static __always_inline void klasy_ref_put(struct percpu_ref *ref)
{
	unsigned long __percpu *count;

	if (__ref_is_percpu(ref, &count))
		this_cpu_dec(*count);
	else if (unlikely(atomic_long_dec_and_test(&ref->data->count)))
		ref->data->release(ref);
}

/*
 * Called by the trampoline with the registers at the function's entry:
 * 1 to call the body and come back to klasy_direct_exit, the call
 * counted in the hook's set, which is in the frame; 0 for no after advice.
 */
asmlinkage int notrace klasy_direct_enter(struct klasy_direct_frame *f)
{
	unsigned long ip = f->regs.ip - MCOUNT_INSN_SIZE;
	struct kretprobe_instance *ri = (struct kretprobe_instance *)f->ri;
	struct klasy_direct *d, *found = NULL;
	struct klasy_hook *h = NULL;
	int bit, ret = 0;

	/*
	 * The trampoline saved the argument registers, bp, sp and ip; the
	 * rest of the pt_regs handlers and the unwinder see is made what a
	 * kernel context's is (user_mode(regs) tests cs), not stack garbage.
	 */
	f->regs.cs = __KERNEL_CS;
	f->regs.ss = __KERNEL_DS;
	f->regs.flags = native_save_fl();
	f->regs.orig_ax = -1;
	f->regs.bx = 0;
	f->regs.r10 = 0;
	f->regs.r11 = 0;
	f->regs.r12 = 0;
	f->regs.r13 = 0;
	f->regs.r14 = 0;
	f->regs.r15 = 0;
	/* Preemption off: an RCU read side, as detach waits for. */
	preempt_disable_notrace();
	/* Idle paths: no RCU, so no lookup either. */
	if (unlikely(!rcu_is_watching()))
		goto out;
	list_for_each_entry_rcu(d, &klasy_directs, node, true) {
		h = klasy_hook_search(d->ips, d->hooks, d->n, ip);
		if (h) {
			found = d;
			break;
		}
	}
	if (!found || !READ_ONCE(found->armed))
		goto out;
	/* Unweave kills the ref only after RCU: it is live here. */
	klasy_ref_get(&found->inside);
	ret = 1;
	/* Kprobes gives a kretprobe's entry handler ip = addr + 1. */
	f->regs.ip = ip + 1;
	f->d = found;
	f->h = h;
	/*
	 * The caller as entry sees it, as rethook records it: the slot the
	 * trampoline returns through may hold another tool's return
	 * trampoline by the exit (fgraph, a kretprobe on the caller).
	 */
	f->ret_addr = *(unsigned long *)f->regs.sp;
	if (!h->rp.entry_handler)
		goto out;
	/*
	 * Nothing above calls a traceable function; the entry handler may
	 * (copy_from_kernel_nofault): a hooked function it calls in the
	 * same context is missed, not entered again.
	 */
	bit = ftrace_test_recursion_trylock(ip, f->ret_addr);
	if (unlikely(bit < 0)) {
		atomic_long_inc(&h->missed);
		ret = 0;
	} else {
		/* Non-zero: a value could not be read, no advice on return. */
		if (h->rp.entry_handler(ri, &f->regs))
			ret = 0;
		ftrace_test_recursion_unlock(bit);
	}
	if (!ret)
		klasy_ref_put(&found->inside);
out:
	preempt_enable_notrace();
	return ret;
}
NOKPROBE_SYMBOL(klasy_direct_enter);

/*
 * Called by the trampoline after the body, with its return value in ax
 * (direct_ok functions return nothing in dx): runs the after advice
 * unless the aspect is being unwoven, and counts the call out. The hook
 * is read only while armed (the advice module may be gone since), the
 * set only up to the put (it may be released by it).
 */
asmlinkage void notrace klasy_direct_exit(struct klasy_direct_frame *f)
{
	struct kretprobe_instance *ri = (struct kretprobe_instance *)f->ri;
	struct klasy_direct *d = f->d;

	/* As a kretprobe's handler sees it: at the caller, sp past the return. */
	f->regs.ip = f->ret_addr;
	f->regs.sp += sizeof(long);
	/*
	 * Preemption off from the armed test to the handler's end: unweave
	 * clears armed, then waits for RCU (preempt-off sections) before it
	 * lets anything go. No recursion lock: the handler's first act is
	 * klasy_enter, which counts a hit inside another handler on this CPU
	 * as missed, so advice calling a hooked function recurses once.
	 */
	preempt_disable_notrace();
	if (likely(READ_ONCE(d->armed))) {
		struct klasy_hook *h = f->h;

		if (likely(rcu_is_watching()))
			h->rp.handler(ri, &f->regs);
		else
			atomic_long_inc(&h->missed);
	}
	klasy_ref_put(&d->inside);
	preempt_enable_notrace();
}
NOKPROBE_SYMBOL(klasy_direct_exit);

/* A candidate: an after hook the trampoline can run (see the top). */
static bool klasy_direct_candidate(const struct klasy_aspect *a,
				   const struct klasy_hook *h)
{
	char sym[KSYM_SYMBOL_LEN];
	unsigned int i;

	if (h->kind != KLASY_HOOK_KRETPROBE || !h->direct_ok || h->module ||
	    !h->rp.handler || h->rp.data_size > KLASY_DIRECT_DATA)
		return false;
	/* A replacement of the same function needs its IPMODIFY. */
	for (i = 0; i < a->nhooks; i++)
		if (a->hooks[i].kind == KLASY_HOOK_REPLACE &&
		    a->hooks[i].rp.kp.addr == h->rp.kp.addr)
			return false;
	/* func+0x0/0x9a: the entry; a '.' in the name: a GCC clone. */
	sprint_symbol(sym, (unsigned long)h->rp.kp.addr);
	return strstr(sym, "+0x0/") && !strchr(sym, '.');
}

static int klasy_cmp_hook(const void *x, const void *y)
{
	unsigned long a = (unsigned long)(*(struct klasy_hook *const *)x)->rp.kp.addr;
	unsigned long b = (unsigned long)(*(struct klasy_hook *const *)y)->rp.kp.addr;

	return a < b ? -1 : a > b;
}

/*
 * The last call left d's trampoline (or unweave killed d's ref with none
 * inside): once no task is in the trampoline's last instructions either
 * (a voluntary switch of every task), d may be freed and this module go.
 */
static void klasy_direct_released(struct rcu_head *rcu)
{
	struct klasy_direct *d = container_of(rcu, struct klasy_direct, rcu);

	/* d is not touched after: the reaper may free it. */
	smp_store_release(&d->gone, true);
	wake_up_all(&klasy_direct_wq);
	module_put(THIS_MODULE);
}

/* Any context: the put of the last call, maybe an interrupt's. */
static void klasy_direct_release(struct percpu_ref *ref)
{
	struct klasy_direct *d = container_of(ref, struct klasy_direct, inside);

	call_rcu_tasks(&d->rcu, klasy_direct_released);
}

static void klasy_direct_free(struct klasy_direct *d)
{
	percpu_ref_exit(&d->inside);
	ftrace_free_filter(&d->ops);
	kfree(d->ips);
	kfree(d->hooks);
	kfree(d);
}

/*
 * klasy_direct_attach puts a's after hooks at ftrace sites on a direct
 * ops, registered but not armed, and marks them on_ops; the others stay
 * kretprobes. Only running out of memory is an error: when ftrace
 * refuses, a->direct_err says why.
 */
int klasy_direct_attach(struct klasy_aspect *a)
{
	struct klasy_direct *d;
	unsigned int i, k;
	int err;

	a->direct = NULL;
	a->direct_err = 0;
	if (!klasy_direct_on())
		return 0;
	d = kzalloc(sizeof(*d), GFP_KERNEL);
	if (!d)
		return -ENOMEM;
	d->hooks = kcalloc(a->nhooks, sizeof(*d->hooks), GFP_KERNEL);
	d->ips = kcalloc(a->nhooks, sizeof(*d->ips), GFP_KERNEL);
	if (!d->hooks || !d->ips ||
	    percpu_ref_init(&d->inside, klasy_direct_release, 0, GFP_KERNEL)) {
		klasy_direct_free(d);
		return -ENOMEM;
	}
	for (i = 0; i < a->nhooks; i++)
		if (klasy_direct_candidate(a, &a->hooks[i]))
			d->hooks[d->n++] = &a->hooks[i];
	if (!d->n) {
		klasy_direct_free(d);
		return 0;
	}
	sort(d->hooks, d->n, sizeof(*d->hooks), klasy_cmp_hook, NULL);
	for (i = 0, k = 0; i < d->n; i++) {
		/* One hook per function: a second stays a kretprobe. */
		if (k && d->ips[k - 1] == (unsigned long)d->hooks[i]->rp.kp.addr)
			continue;
		d->ips[k] = (unsigned long)d->hooks[i]->rp.kp.addr;
		d->hooks[k++] = d->hooks[i];
	}
	d->n = k;

	err = ftrace_set_filter_ips(&d->ops, d->ips, d->n, 0, 1);
	if (err == -EINVAL) {
		/* Which functions have no ftrace record, one by one. */
		ftrace_free_filter(&d->ops);
		for (i = 0, k = 0; i < d->n; i++) {
			if (!ftrace_set_filter_ip(&d->ops, d->ips[i], 0, 0)) {
				d->ips[k] = d->ips[i];
				d->hooks[k++] = d->hooks[i];
			}
		}
		d->n = k;
		err = 0;
	}
	/* An empty filter would trace every function. */
	if (!err && d->n)
		err = register_ftrace_direct_multi(&d->ops, (unsigned long)klasy_direct_tramp);
	if (err || !d->n) {
		if (err)
			pr_info("aspect %s: ftrace refused a direct ops for its after hooks (error %d): kretprobes instead\n",
				a->name, err);
		klasy_direct_free(d);
		a->direct_err = err;
		return 0;
	}
	WRITE_ONCE(klasy_direct_used, true);
	mutex_lock(&klasy_directs_mutex);
	list_add_tail_rcu(&d->node, &klasy_directs);
	mutex_unlock(&klasy_directs_mutex);
	for (i = 0; i < d->n; i++)
		d->hooks[i]->on_ops = true;
	a->direct = d;
	return 0;
}

void klasy_direct_arm(struct klasy_aspect *a)
{
	if (a->direct)
		WRITE_ONCE(a->direct->armed, true);
}

void klasy_direct_disarm(struct klasy_aspect *a)
{
	if (a->direct)
		WRITE_ONCE(a->direct->armed, false);
}

/* Frees the held sets no call is inside any more. */
static void klasy_direct_reap(void)
{
	struct klasy_direct *d, *tmp;

	lockdep_assert_held(&klasy_directs_mutex);
	list_for_each_entry_safe(d, tmp, &klasy_held, node) {
		/* Pairs with klasy_direct_released's: it is done with d. */
		if (smp_load_acquire(&d->gone)) {
			list_del(&d->node);
			klasy_direct_free(d);
		}
	}
}

/*
 * Takes the ops out; the hooks and the advice module may go after it.
 * Calls still inside a hooked function keep the set and this module
 * (see the top): it waits for them KLASY_DIRECT_WAIT at most.
 */
void klasy_direct_detach(struct klasy_aspect *a)
{
	struct klasy_direct *d = a->direct;
	unsigned int i;
	int err;

	if (!d)
		return;
	a->direct = NULL;
	WRITE_ONCE(d->armed, false);
	err = unregister_ftrace_direct_multi(&d->ops, (unsigned long)klasy_direct_tramp);
	mutex_lock(&klasy_directs_mutex);
	list_del_rcu(&d->node);
	mutex_unlock(&klasy_directs_mutex);
	/*
	 * No task between a site and its lookup (preempted ones included),
	 * no entry that saw armed and has not taken its ref, no handler
	 * that saw armed still running: the hooks are not touched again.
	 */
	synchronize_rcu_tasks();
	synchronize_rcu();
	for (i = 0; i < d->n; i++)
		d->hooks[i]->on_ops = false;
	if (WARN_ONCE(err, "aspect %s: unregister_ftrace_direct_multi: %d\n", a->name, err)) {
		/*
		 * Still linked in ftrace, its sites may still call the
		 * trampoline: the set and this module stay for good.
		 */
		__module_get(THIS_MODULE);
		pr_err("aspect %s: a direct ftrace_ops still linked is left allocated; the runtime stays loaded\n",
		       a->name);
		return;
	}
	/* Dropped by the ref's release, once no call is inside. */
	__module_get(THIS_MODULE);
	percpu_ref_kill(&d->inside);
	/* Acquire: pairs with klasy_direct_released's release. */
	if (wait_event_timeout(klasy_direct_wq, smp_load_acquire(&d->gone),
			       KLASY_DIRECT_WAIT)) {
		klasy_direct_free(d);
		return;
	}
	pr_info("aspect %s: calls are still inside functions its after advice was on: the runtime stays loaded until they return\n",
		a->name);
	mutex_lock(&klasy_directs_mutex);
	list_add_tail(&d->node, &klasy_held);
	klasy_direct_reap();
	mutex_unlock(&klasy_directs_mutex);
}

unsigned int klasy_direct_count(const struct klasy_aspect *a)
{
	return a->direct ? a->direct->n : 0;
}

bool klasy_direct_is(const struct klasy_hook *h)
{
	return h->on_ops && h->kind == KLASY_HOOK_KRETPROBE;
}

unsigned int klasy_direct_held(void)
{
	struct klasy_direct *d;
	unsigned int n = 0;

	mutex_lock(&klasy_directs_mutex);
	klasy_direct_reap();
	list_for_each_entry(d, &klasy_held, node)
		n++;
	mutex_unlock(&klasy_directs_mutex);
	return n;
}

/*
 * Each held set holds this module until its release has run: here they
 * are all released, only their callbacks may still be returning.
 */
void klasy_direct_exit_module(void)
{
	if (!READ_ONCE(klasy_direct_used))
		return;
	rcu_barrier_tasks();
	mutex_lock(&klasy_directs_mutex);
	klasy_direct_reap();
	WARN_ON(!list_empty(&klasy_held));
	mutex_unlock(&klasy_directs_mutex);
}

#else /* no direct calls */

int klasy_direct_attach(struct klasy_aspect *a)
{
	a->direct = NULL;
	a->direct_err = 0;
	return 0;
}

void klasy_direct_arm(struct klasy_aspect *a)
{
}

void klasy_direct_disarm(struct klasy_aspect *a)
{
}

void klasy_direct_detach(struct klasy_aspect *a)
{
}

unsigned int klasy_direct_count(const struct klasy_aspect *a)
{
	return 0;
}

bool klasy_direct_is(const struct klasy_hook *h)
{
	return false;
}

unsigned int klasy_direct_held(void)
{
	return 0;
}

void klasy_direct_exit_module(void)
{
}

#endif
