/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The ABI between the klasy runtime module (klasy_runtime.ko)
 * and the advice modules klasy generates, one per woven aspect.
 *
 * An advice module fills a struct klasy_aspect with one struct klasy_hook
 * per hook (an address and a kind: kprobe before, kretprobe after), each
 * with the module's own handler (the trampoline that computes the context
 * variables and calls that hook's advice in aspect order), and registers
 * it with klasy_register_aspect() from its init function: all hooks or
 * none. Its exit function calls klasy_unregister_aspect(). The runtime
 * keeps the trace buffer (a FIFO of records per CPU), counts hits, misses
 * and lost records, and shows all of it in debugfs:
 *
 *   /sys/kernel/debug/klasy/records  read: consumes whole records (below)
 *   /sys/kernel/debug/klasy/status   read: the runtime, aspects and hooks
 *   /sys/kernel/debug/klasy/stats    read: the aspects' aggregations
 *                                    (COUNT, HIST, TIMER_START... below)
 *   /sys/kernel/debug/klasy/flow_ids read: what get_new_flowid() counted
 *   /sys/kernel/debug/klasy/stacks   read: the kernel stacks STACK_ID() saved
 *
 * The Go side reads both (weaver/records); a test compiles this header
 * and checks the record layout against the Go decoder through DWARF.
 */
#ifndef _KLASY_RT_H
#define _KLASY_RT_H

#include <linux/types.h>
#include <linux/atomic.h>
#include <linux/compiler.h>
#include <linux/kprobes.h>
#include <linux/list.h>
#include <linux/percpu.h>
#include <linux/string.h>
#include <linux/uaccess.h>	/* copy_from_kernel_nofault() for READ_CHECKED */
#include <asm/msr.h>		/* rdtsc() for DO_RDTSC */

/* Bumped on any change to what follows; status shows it as abi=N. */
#define KLASY_ABI_VERSION 19

/* Values one advice may store per hit; more are counted as dropped. */
#define KLASY_MAX_VALUES 16

/* Hooks one aspect may have: a record's hook index is 16 bits. */
#define KLASY_MAX_HOOKS 65536

/*
 * One record in the records file, little-endian: this 48-byte header,
 * then nvals u64 values, so every record is a multiple of 8 bytes long.
 * A read returns whole records only, oldest first across CPUs (by
 * time_ns), 0 when none are left that were stamped before the file was
 * opened, and -EINVAL when the buffer it is given cannot hold the next
 * record (KLASY_RECORD_MAX bytes always can).
 */
struct klasy_record {
	__u64 time_ns;	/* ktime_get_mono_fast_ns() at the hit */
	__u32 aspect;	/* aspect id (status: aspect id=N) */
	__u16 hook;	/* hook index within its aspect */
	__u16 advice;	/* advice number, 1-based in the aspect file */
	__u32 pid;
	__u16 cpu;
	__u8 nvals;
	__u8 dropped;	/* values past KLASY_MAX_VALUES, saturating at 255 */
	char comm[16];
	__s32 flow;	/* the flow ID the advice ran for (xflow), 0 for none */
	__u32 typed;	/* bit i: vals[i] starts a typed blob (below) */
	__u64 vals[];
};

/*
 * A typed blob in vals: bit i of typed set means vals[i] is
 * (u64)kind << 32 | byte_length, followed by DIV_ROUND_UP(byte_length, 8)
 * values holding the bytes (the last one zero-padded). Bits are set only
 * on blob starts. A reader that does not know a kind shows its bytes raw.
 *
 * A string (STORE_STR, STORE_USTR) holds its bytes with the terminating
 * NUL when the whole string fit in KLASY_STR_MAX bytes; a longer one
 * holds its first KLASY_STR_MAX (or as many as the record had room for)
 * without a NUL: truncated. A string whose address could not be read
 * has byte_length 0.
 */
enum klasy_val_kind {
	KLASY_VAL_KSTR = 1,	/* a string in kernel memory */
	KLASY_VAL_USTR = 2,	/* a string in user memory */
	KLASY_VAL_KSTACK = 3,	/* a kernel stack id: 8 bytes (STORE_STACK) */
};

#define KLASY_STR_MAX 64	/* bytes of a string kept, NUL included */

#define KLASY_RECORD_MAX (sizeof(struct klasy_record) + KLASY_MAX_VALUES * sizeof(__u64))

/*
 * What one advice stored during one hit, and sp and regs, the probed
 * context's stack pointer (kernel_stack_pointer(regs)) and registers,
 * which the handler sets once per hit for TIMER_START's depth, and cfa,
 * the call whose per-call variables CALL_SET/CALL_GET use (0: none).
 */
struct klasy_hit {
	unsigned int n;
	unsigned int dropped;
	int flow;
	unsigned int busy;	/* a klasy handler runs on this CPU: klasy_enter */
	u32 typed;		/* the record's typed bitmap */
	unsigned long sp;
	struct pt_regs *regs;
	unsigned long cfa;
	u64 vals[KLASY_MAX_VALUES];
};

/* klasy_hit_begin starts the hit that one advice records. */
static inline void klasy_hit_begin(struct klasy_hit *hit)
{
	hit->n = 0;
	hit->dropped = 0;
	hit->flow = 0;
	hit->typed = 0;
}

/*
 * The hit being recorded on this CPU. One per CPU is enough: at most one
 * klasy handler runs per CPU at a time. The kernel runs at most one
 * kprobe handler per CPU (a probe hit while current_kprobe is set, from
 * an interrupt or NMI too, is counted in nmissed and its handler not
 * run; kretprobe handlers likewise), but entry hooks on the runtime's
 * ftrace_ops are not kprobes: an interrupt or NMI may hit one inside a
 * kprobe handler, or a kprobe inside one. So every handler that touches
 * the hit or the aggregation maps starts with klasy_enter and ends with
 * klasy_leave, and a hit that finds another handler running is counted
 * as missed, as kprobes counts it. Keeping the hit off the handler's
 * stack spares every hit the zeroing of a 152-byte local
 * (CONFIG_INIT_STACK_ALL_ZERO) and a stack canary check.
 */
DECLARE_PER_CPU(struct klasy_hit, klasy_hit);

enum klasy_hook_kind {
	KLASY_HOOK_KPROBE = 0,	  /* before: a kprobe at addr */
	KLASY_HOOK_KRETPROBE = 1, /* after an out-of-line function returns */
	KLASY_HOOK_REPLACE = 2,	  /* <replace>: the function at addr returns at once */
	KLASY_HOOK_TRACEPOINT = 3, /* a probe on the tracepoint named tracepoint */
};

struct tracepoint;

/*
 * One hook. The advice module fills everything above "runtime's"; for a
 * kprobe or a replacement it sets rp.kp.addr and rp.kp.pre_handler (and
 * rp.kp.post_handler for after advice at an instruction), for a kretprobe
 * rp.kp.addr, rp.handler and optionally rp.entry_handler/rp.data_size.
 * For a tracepoint it sets tracepoint (the event's name, as struct
 * tracepoint names it) and probe, the function with the event's
 * prototype, registered with the hook as its data; the kernel counts no
 * misses for it, so the probe counts in rp.kp.nmissed what it leaves out.
 * The runtime sets rp.kp.flags, and a replacement's rp.kp.post_handler.
 * Strings are shown in status with spaces and control characters as '_',
 * NULL or "" as "-".
 */
struct klasy_hook {
	struct kretprobe rp;		/* rp.kp alone for a kprobe */
	enum klasy_hook_kind kind;
	unsigned long image_addr;	/* the address in the image (vmlinux, or module's .ko) */
	const char *function;		/* where the hook is (the inlined one) */
	const char *inlined_in;		/* for an inlined copy, else NULL */
	const char *file;		/* source file of the join point */
	unsigned int line;
	unsigned int nadvice;
	const u16 *advice;		/* advice numbers, in call order */
	const char *module;		/* the module whose code holds the hook, NULL for the kernel */
	const char *access;		/* access join points: read, write, rw or addr, else NULL */
	/*
	 * The handler reads no saved register but those ftrace saves for a
	 * function's arguments (ax, cx, dx, si, di, r8, r9, bp, sp, ip):
	 * on an ftrace_ops the registers other than these are not saved
	 * (not FTRACE_OPS_FL_SAVE_REGS), and read as garbage.
	 */
	bool args_only;
	/*
	 * KLASY_HOOK_KRETPROBE: the function takes its arguments in
	 * registers only (at most six, none a struct or variadic) and
	 * returns nothing or a value in rax, so the runtime may call its
	 * body from a trampoline (klasy_direct.c) instead of a kretprobe;
	 * and the handlers read only the argument registers at entry, ax
	 * at return, and bp, sp, ip: the trampoline saves no other.
	 */
	bool direct_ok;
	const char *tracepoint;		/* KLASY_HOOK_TRACEPOINT: the event */
	void *probe;			/* KLASY_HOOK_TRACEPOINT: its probe */

	/* runtime's */
	struct tracepoint *tp;		/* the tracepoint probe is registered on */
	struct klasy_aspect *aspect;
	unsigned int index;
	u64 __percpu *hit;		/* this hook's hit counter */
	atomic_long_t missed;		/* hits klasy_enter or ftrace refused */
	bool on_ops;			/* on the aspect's ftrace_ops (or, after, its direct ops), not a kprobe */
};

/*
 * klasy_enter claims this CPU's hit for h's handler: false (the hit
 * counted as missed) when another klasy handler runs on the CPU, which
 * this one interrupted. An interrupt between the test and the set runs
 * its handler to the end before this one goes on, so a plain per-CPU
 * flag is enough.
 */
static __always_inline bool klasy_enter(struct klasy_hit *hit,
					struct klasy_hook *h)
{
	if (unlikely(READ_ONCE(hit->busy))) {
		atomic_long_inc(&h->missed);
		return false;
	}
	WRITE_ONCE(hit->busy, 1);
	barrier();
	return true;
}

static __always_inline void klasy_leave(struct klasy_hit *hit)
{
	hit->cfa = 0;	/* a call's only for the handler that set it */
	barrier();
	WRITE_ONCE(hit->busy, 0);
}

/*
 * The room an aspect's aggregation maps take, by kind: maps of each kind
 * the generator found in the advice (below). Zero for an aspect that
 * aggregates nothing: it then costs no memory.
 */
struct klasy_agg_room {
	u16 keyed;	/* COUNT, SUM, MINIMUM, MAXIMUM */
	u16 hist;	/* HIST */
	u16 lhist;	/* LHIST */
	u16 timer;	/* TIMER_START/TIMER_STOP names */
	u16 by;		/* COUNT_BY, SUM_BY, MINIMUM_BY, MAXIMUM_BY */
	u16 hist_by;	/* HIST_BY */
	u16 lhist_by;	/* LHIST_BY */
	u16 timer_by;	/* TIMER_START_BY/TIMER_STOP_BY names */
};

struct klasy_agg;
struct klasy_smap;
struct klasy_calls;
struct klasy_fops;
struct klasy_direct;

/*
 * A running address in a module that an advice module was generated for
 * (from /sys/module/NAME/sections): a hook's, or a static's that its
 * advice reads. kallsyms must name it symbol+offset in module, or the
 * module was reloaded since and the address is stale; the runtime then
 * refuses the whole aspect (-ESTALE) before registering any hook. A
 * static is checked only with CONFIG_KALLSYMS_ALL (kallsyms has no data
 * symbols without it); the check of its hook, in the same module, stays.
 */
struct klasy_addr_check {
	unsigned long addr;
	const char *module;
	const char *symbol;
	unsigned long offset;
	unsigned int hook;	/* the hook it is, or whose advice reads it */
	bool is_static;		/* a static the advice reads, not the hook */
};

struct klasy_aspect {
	const char *name;		/* the aspect's name (file name) */
	struct module *owner;		/* THIS_MODULE */
	unsigned int nhooks;
	struct klasy_hook *hooks;
	struct klasy_agg_room agg_room;
	unsigned int nchecks;
	const struct klasy_addr_check *checks;
	unsigned int nsmaps;		/* shared maps (MAP_SET...), by name */
	const char *const *smap_names;
	const u32 *smap_sizes;		/* keys each holds (MAP_SIZE), 0: the default */
	struct klasy_calls *calls;	/* its per-call variables, or NULL */

	/* runtime's */
	u32 id;				/* from 1, never reused while loaded */
	/*
	 * The hooks' hit counters, KLASY_HITS_PER_CHUNK per percpu
	 * allocation: one allocation may not exceed the percpu unit size
	 * (32 KiB at least), and an aspect may have thousands of hooks.
	 */
	u64 __percpu **hits;
	unsigned int nchunks;
	struct list_head node;
	struct kprobe **kps;		/* the kprobes, for one batch */
	struct kretprobe **rps;		/* the kretprobes, for one batch */
	unsigned int nkps, nrps;
	u64 register_ns;		/* time klasy_register_aspect took */
	bool tp_unregistered;		/* a probe is out: wait for its handlers */
	struct klasy_agg *agg;		/* the aggregation maps (klasy_agg.c) */
	struct klasy_smap *smaps;	/* the shared maps (klasy_smap.c) */
	struct klasy_fops *fops;	/* its entry hooks' ftrace_ops, or NULL */
	int fops_err;			/* why its entry hooks are kprobes, or 0 */
	struct klasy_direct *direct;	/* its after hooks' direct ops, or NULL */
	int direct_err;			/* why its after hooks are kretprobes, or 0 */
};

/*
 * klasy_register_aspect registers every hook of a, all or nothing: on
 * failure nothing stays registered and the error is returned (the
 * kernel's: -EINVAL for a refused address, -EILSEQ for one that is not an
 * instruction boundary, -ESTALE for a module address that kallsyms
 * names otherwise than a->checks says, ...), with the failing hook's
 * index in *failed,
 * or a->nhooks when no hook is to blame (-ENOMEM, no or too many hooks).
 * failed may be NULL. Hooks are registered disabled and enabled once all
 * are in. Call it from the advice module's init, and
 * klasy_unregister_aspect from its exit (it waits for running handlers).
 */
int klasy_register_aspect(struct klasy_aspect *a, unsigned int *failed);
void klasy_unregister_aspect(struct klasy_aspect *a);

/*
 * Replacing a function (<replace> advice). A KLASY_HOOK_REPLACE hook is a
 * kprobe at the function's entry that the kernel must place on the
 * function's ftrace call site, where kprobes arms it through an ftrace_ops
 * with FTRACE_OPS_FL_IPMODIFY (the runtime gives it a post handler for
 * that: kernel/kprobes.c arms kprobes with a post handler so). Its pre
 * handler runs the replacement, then calls klasy_replace_return() and
 * returns 1: kprobes then leaves regs->ip as set, and ftrace's trampoline
 * resumes at klasy_return_stub, a lone ret, with rax the value; the ret
 * pops the return address the caller pushed, so the caller gets the value
 * and the body never runs. This is what function error injection does
 * (override_function_with_return, arch/x86/lib/error-inject.c, not
 * exported and absent from kernels without CONFIG_FUNCTION_ERROR_INJECTION
 * such as Debian's 6.1). The handler may instead return 0 (a context
 * value could not be read): the original body runs.
 */
asmlinkage void klasy_return_stub(void);

static __always_inline void klasy_replace_return(struct pt_regs *regs,
						 unsigned long v)
{
	regs_set_return_value(regs, v);
	instruction_pointer_set(regs, (unsigned long)klasy_return_stub);
}

/* klasy_emit appends one record for this hit if the advice stored any value. */
void klasy_emit(struct klasy_hook *h, u16 advice, const struct klasy_hit *hit);

#define KLASY_HITS_PER_CHUNK 2048

/* klasy_count_hit counts one hit of hook h on this CPU (preemption is off). */
static inline void klasy_count_hit(struct klasy_hook *h)
{
	__this_cpu_inc(*h->hit);
}

/*
 * The advice macros (dissertation §5.2). Inside an advice body the hit
 * being recorded is __klasy_hit.
 */
static inline void klasy_store(struct klasy_hit *hit, u64 v)
{
	if (likely(hit->n < KLASY_MAX_VALUES))
		hit->vals[hit->n++] = v;
	else
		hit->dropped++;
}

/*
 * klasy_store_blob reserves a typed blob of len bytes (see struct
 * klasy_record) and returns where its bytes go, its last value zeroed;
 * NULL, one value counted as dropped, when the hit has no room for it.
 */
static inline void *klasy_store_blob(struct klasy_hit *hit, u32 kind, u32 len)
{
	unsigned int slots = 1 + DIV_ROUND_UP(len, 8);

	if (unlikely(hit->n + slots > KLASY_MAX_VALUES)) {
		hit->dropped++;
		return NULL;
	}
	hit->typed |= 1U << hit->n;
	/* The padding first: a 0-byte blob is its header alone. */
	hit->vals[hit->n + slots - 1] = 0;
	hit->vals[hit->n] = (u64)kind << 32 | len;
	hit->n += slots;
	return &hit->vals[hit->n - slots + 1];
}

/*
 * klasy_store_str stores the string at p, in kernel memory
 * (KLASY_VAL_KSTR) or user memory (KLASY_VAL_USTR), as a typed blob,
 * without faulting: see struct klasy_record for its form.
 */
void klasy_store_str(struct klasy_hit *hit, u32 kind, const void *p);

#define STORE_DATA(x) klasy_store(__klasy_hit, (u64)(x))
/*
 * STORE_STR(p) records the NUL-terminated string at kernel address p,
 * STORE_USTR(p) the one at user address p (a syscall's argument): at
 * most KLASY_STR_MAX bytes, a longer one marked truncated. An address
 * that cannot be read is recorded as such, never faulting.
 */
#define STORE_STR(p) klasy_store_str(__klasy_hit, KLASY_VAL_KSTR, (const void *)(p))
#define STORE_USTR(p) klasy_store_str(__klasy_hit, KLASY_VAL_USTR, (const void *)(p))
/* KLASY_SET_FLOW(id) stamps this hit's record with a flow ID (xflow). */
#define KLASY_SET_FLOW(id) (__klasy_hit->flow = (id))
#define STORE_DATA1(a) STORE_DATA(a)
#define STORE_DATA2(a, b) do { STORE_DATA(a); STORE_DATA(b); } while (0)
#define STORE_DATA3(a, b, c) do { STORE_DATA2(a, b); STORE_DATA(c); } while (0)
#define STORE_DATA4(a, b, c, d) do { STORE_DATA3(a, b, c); STORE_DATA(d); } while (0)
#define STORE_DATA5(a, b, c, d, e) do { STORE_DATA4(a, b, c, d); STORE_DATA(e); } while (0)
#define STORE_DATA6(a, b, c, d, e, f) do { STORE_DATA5(a, b, c, d, e); STORE_DATA(f); } while (0)
#define STORE_DATA7(a, b, c, d, e, f, g) do { STORE_DATA6(a, b, c, d, e, f); STORE_DATA(g); } while (0)
#define STORE_DATA8(a, b, c, d, e, f, g, h) do { STORE_DATA7(a, b, c, d, e, f, g); STORE_DATA(h); } while (0)

/*
 * READ_CHECKED(p) is *p read without trusting p: advice runs in a klasy
 * handler (a kprobe's, an ftrace_ops', a tracepoint's), where a bad
 * pointer oopses the kernel. A pointer that does not lead to readable
 * kernel memory (NULL, a user address, an unmapped one) reads as zero;
 * ok, if given as READ_CHECKED_OK(p, ok), says which (evaluated once).
 * Only this load is checked: in READ_CHECKED(&a->b->c), a->b is read as
 * plain C. At most 64 bytes, copied to the stack: a handler may run on
 * the 4 KiB NMI stack.
 */
#define READ_CHECKED_OK(p, ok) ({					\
	__unqual_scalar_typeof(*(p)) __klasy_v;				\
	bool __klasy_read;						\
	static_assert(sizeof(__klasy_v) <= 64,				\
		      "READ_CHECKED reads at most 64 bytes");		\
	__klasy_read = !copy_from_kernel_nofault((void *)&__klasy_v,	\
						 (p), sizeof(__klasy_v)); \
	if (!__klasy_read)						\
		memset((void *)&__klasy_v, 0, sizeof(__klasy_v));	\
	(ok) = __klasy_read;						\
	__klasy_v;							\
})
#define READ_CHECKED(p) ({						\
	bool __klasy_ok;						\
	READ_CHECKED_OK(p, __klasy_ok);					\
})

/* DO_RDTSC(v) sets v to the time stamp counter. */
#define DO_RDTSC(v) ((v) = rdtsc())

/*
 * Flows (dissertation ch. 5, the xflow pointcut). The runtime keeps one
 * table per flow name, from an object's address to its flow ID (see
 * klasy_flow.h for how); advice modules that name the same flow share its
 * table. xflow/translate.go turns <xflow> definitions into advice that
 * calls the dissertation's functions below, FLOW being the flow's name as
 * a C identifier: the macros paste it into the name of the advice
 * module's pointer to the table, so a flow named like a kernel symbol or
 * macro cannot clash with it. An advice module declares each flow it
 * uses, attaches it in its init before klasy_register_aspect and detaches
 * it in its exit after klasy_unregister_aspect (no advice runs then):
 *
 *   KLASY_DECLARE_FLOW(netflow);
 *   err = KLASY_FLOW_GET(netflow);     0 or -EINVAL, -ENOMEM
 *   KLASY_FLOW_PUT(netflow);
 *
 * The functions run in any context (task, softirq, hardirq, NMI);
 * lookups take no lock. In NMI, and nested in the table's own locked
 * section, register and remove only try their locks and are counted
 * dropped when they cannot have them (klasy_flow.h).
 *
 * The section between the two klasy_flow_abi lines is plain C: the
 * user-space harness that tests and measures klasy_flow.c compiles it.
 */
/* klasy_flow_abi: begin */
struct klasy_flow;

int klasy_flow_get(const char *name, struct klasy_flow **flow);
void klasy_flow_put(struct klasy_flow *flow);
int klasy_flow_new_id(void);
void klasy_flow_register(struct klasy_flow *flow, const void *obj, int id);
int klasy_flow_lookup(struct klasy_flow *flow, const void *obj);
void klasy_flow_remove(struct klasy_flow *flow, const void *obj);
void klasy_flow_truncated(struct klasy_flow *flow, int id, unsigned int bits);
void klasy_flow_no_id(struct klasy_flow *flow);

#define KLASY_DECLARE_FLOW(flow) static struct klasy_flow *__klasy_flow_##flow
#define KLASY_FLOW_GET(flow) klasy_flow_get(#flow, &__klasy_flow_##flow)
#define KLASY_FLOW_PUT(flow) klasy_flow_put(__klasy_flow_##flow)

/*
 * A fresh, non-zero ID, unique among the domains of one weave and not
 * carried by any live object of this runtime's tables; 0 (no ID) in the
 * rare case that it finds none in a bounded number of tries (counted in
 * klasy/flow_ids).
 */
#define get_new_flowid() klasy_flow_new_id()
/* obj now carries id (id 0: none). */
#define register_flowid(flow, obj, id) \
	klasy_flow_register(__klasy_flow_##flow, (obj), (id))
/* The ID obj carries, 0 if none. */
#define get_flowid(flow, obj) klasy_flow_lookup(__klasy_flow_##flow, (obj))
/* obj carries none. */
#define remove_flowid(flow, obj) klasy_flow_remove(__klasy_flow_##flow, (obj))
/*
 * id is about to be cut to its low bits to fit a header (xin_move,
 * xin_copy): counted as ambiguous if another ID live in this table has the
 * same low bits.
 */
#define truncate_flowid(flow, id, bits) \
	klasy_flow_truncated(__klasy_flow_##flow, (int)(id), (bits))
/*
 * xout_move or xout_copy found no ID in the header it reads (the packet
 * was not sent from a flow, or its ID was cut to 0): nothing is
 * registered, and status counts it as noid.
 */
#define flowid_not_found(flow) klasy_flow_no_id(__klasy_flow_##flow)
/* klasy_flow_abi: end */

/*
 * In-kernel aggregation (klasy stats): instead of a record per hit, advice
 * counts, sums and draws histograms in place, and 'klasy stats' reads the
 * result while the aspect stays woven (as bpftrace's maps and SystemTap's
 * aggregates). Each map is per CPU and updated without a lock or an atomic
 * instruction (one klasy handler runs per CPU at a time, see klasy_hit);
 * the stats file merges the CPUs when it is read.
 *
 *   COUNT(key)              hits per key
 *   SUM(key, v)             the sum of v per key
 *   MINIMUM(key, v)         the least v per key
 *   MAXIMUM(key, v)         the greatest v per key
 *   HIST(v)                 v in power-of-two buckets, as bpftrace's hist()
 *   LHIST(v, lo, hi, step)  v in linear buckets, as bpftrace's lhist():
 *                           lo, hi and step are constants, hi - lo a
 *                           multiple of step, at most 1000 buckets
 *   TIMER_START(name)       starts timer name for the current task
 *   TIMER_STOP(name)        stops it: the wall time and the task's on-CPU
 *                           time in between (time switched out excluded,
 *                           as KernInst's virtualized timers), aggregated
 *                           per name: count, total, least, greatest and a
 *                           histogram of each
 *
 * (MIN and MAX are the kernel's own in linux/minmax.h, hence MINIMUM and
 * MAXIMUM.) Keys and values are 64-bit: a key is any integer or pointer
 * (current->pid, an skb), a value is signed.
 *
 * Keys of several values, strings among them (bpftrace's @[comm, pid]):
 *
 *   COUNT_BY(name, k...)                    hits per key
 *   SUM_BY(name, k..., v), MINIMUM_BY(name, k..., v), MAXIMUM_BY(...)
 *   HIST_BY(name, k..., v)                  a histogram per key
 *   LHIST_BY(name, k..., v, lo, hi, step)   a linear one per key
 *   TIMER_START_BY(name, k...)              starts timer name for the
 *                                           current task, keeping k...
 *   TIMER_STOP_BY(name)                     stops it: its times are
 *                                           aggregated under the START's
 *                                           key (per key: as TIMER's)
 *
 * k... is one to four values, each an integer or KEY_STR(p) (the string
 * at kernel address p, as STORE_STR) or KEY_USTR(p) (user address) or
 * KEY_KSTACK() (the probed context's kernel stack, as STACK_ID). A
 * key is stored in KLASY_KEY_WORDS u64s, encoded as a record's values
 * (an integer one, a string a typed blob of its bytes): a string is cut
 * (and shown marked) to what the key has room for, a key that has no
 * room for its next value is not counted (dropped). A keyed timer's
 * START and STOP pair up per task as TIMER_START and TIMER_STOP do; its
 * task table holds the key with each task's timing. Such a map holds
 * KLASY_AGG_BY_KEYS keys per CPU, KLASY_AGG_HIST_BY_KEYS for
 * histograms; updates of further keys are counted as dropped.
 *
 * Naming: a map is named by its macro and line ("count:12" for a COUNT on
 * the aspect's line 12): two of one kind on one line are one map. The _AS
 * forms name it: COUNT_AS(name, key), SUM_AS(name, key, v),
 * MINIMUM_AS(name, key, v), MAXIMUM_AS(name, key, v), HIST_AS(name, v),
 * LHIST_AS(name, v, lo, hi, step), with name an identifier. A name is the
 * aspect's: every use of it, in any advice of the aspect, is one map,
 * which must be of one kind (and for LHIST of the same buckets). A timer
 * is always named, and TIMER_START in one advice (before) and TIMER_STOP
 * in another (after) time the same task between them.
 *
 * Bounds, none silent: at most KLASY_AGG_KEYS keys per map on each CPU
 * (updates of further keys are counted as dropped); KLASY_AGG_TASKS tasks
 * inside one timer at once (further starts are counted as dropped, unless
 * a task's timing is older than a minute: that task's slot is taken and
 * its timing counted as orphaned); a STOP without a START in the same
 * task is counted, not timed. A TIMER_START of a task already inside that
 * timer, deeper on its stack (recursion) or from an interrupt, is counted
 * as nested and only the outermost START/STOP pair is timed; one at the
 * outermost START's depth or above starts the timing afresh, and the
 * first, whose STOP never came (a kretprobe that missed, an error path),
 * is counted as orphaned. A use the runtime cannot make a map for (a name
 * of another kind; more maps than the aspect has room for) is listed in
 * the stats with the reason, its hits counted.
 *
 * Maps are made at their first hit, from room the runtime reserves when the
 * aspect registers (agg_room). The macros find their aspect through the
 * generated module's hook table, so they work in advice bodies.
 */
enum klasy_agg_kind {
	KLASY_AGG_COUNT = 1,
	KLASY_AGG_SUM,
	KLASY_AGG_MIN,
	KLASY_AGG_MAX,
	KLASY_AGG_HIST,
	KLASY_AGG_LHIST,
	KLASY_AGG_TIMER,
};

#define KLASY_AGG_KEY_BITS 10
#define KLASY_AGG_KEYS (1 << KLASY_AGG_KEY_BITS)	/* keys per map and CPU */
#define KLASY_AGG_HIST_BUCKETS 65	/* below 0, 0, 1, [2^k, 2^(k+1)) up to 2^63 */
#define KLASY_AGG_LHIST_MAX 1000	/* linear buckets, as bpftrace bounds lhist */
#define KLASY_AGG_TASK_BITS 10
#define KLASY_AGG_TASKS (1 << KLASY_AGG_TASK_BITS)	/* tasks in one timer at once */
#define KLASY_AGG_MAX_MAPS 64		/* maps per aspect */
#define KLASY_KEY_WORDS 8		/* a _BY key: 64 bytes */
#define KLASY_KEY_VALUES 4		/* values in a _BY key */
#define KLASY_AGG_BY_KEYS 256		/* keys per _BY map and CPU */
#define KLASY_AGG_HIST_BY_KEYS 64	/* keys per HIST_BY, LHIST_BY map and CPU */

/*
 * A _BY map's key: nw words, typed marking the ones that start a string
 * (as in struct klasy_record); the macros zero it first, so that equal
 * keys are equal bytes. nw past KLASY_KEY_WORDS: a value found no room.
 */
struct klasy_key {
	u32 typed;
	u32 nw;
	u64 w[KLASY_KEY_WORDS];
};

struct klasy_map;

/*
 * One use of a macro: static in the advice, filled by the macro, except
 * map, which the runtime sets at the use's first hit.
 */
struct klasy_map_desc {
	u8 kind;		/* enum klasy_agg_kind */
	const char *name;	/* the _AS name, NULL for a map named by its line */
	const char *file;	/* __FILE__: the aspect's, by #line */
	const char *func;	/* __func__: klasy_advice_N */
	unsigned int line;	/* __LINE__: the aspect's */
	u8 keykind;		/* what keys are: KLASY_KEY_INT, KLASY_KEY_KSTACK */
	s64 lo, hi, step;	/* LHIST */
	u8 by;			/* a _BY form: keys are struct klasy_key */
	struct klasy_map *map;	/* runtime's */
};

void klasy_agg_keyed(struct klasy_aspect *a, struct klasy_map_desc *d, u64 key, s64 v);
void klasy_agg_hist(struct klasy_aspect *a, struct klasy_map_desc *d, s64 v);
void klasy_agg_by(struct klasy_aspect *a, struct klasy_map_desc *d,
		  const struct klasy_key *k, s64 v);
void klasy_key_add(struct klasy_key *k, u32 kind, u64 v);
void klasy_timer_start(struct klasy_aspect *a, struct klasy_map_desc *d);
void klasy_timer_start_by(struct klasy_aspect *a, struct klasy_map_desc *d,
			  const struct klasy_key *k);
void klasy_timer_stop(struct klasy_aspect *a, struct klasy_map_desc *d);

/* The aspect of the generated module the macro is expanded in. */
#define KLASY_THIS_ASPECT (klasy_hooks[0].aspect)

#define __KLASY_DESC(k, nm, ...)					\
	static struct klasy_map_desc __klasy_desc = {			\
		.kind = (k), .name = (nm), .file = __FILE__,		\
		.func = __func__, .line = __LINE__, ##__VA_ARGS__	\
	}

#define __KLASY_KEYED(k, nm, key, v) do {				\
	__KLASY_DESC(k, nm);						\
	klasy_agg_keyed(KLASY_THIS_ASPECT, &__klasy_desc, (u64)(key), (s64)(v)); \
} while (0)

#define __KLASY_HIST(nm, v) do {					\
	__KLASY_DESC(KLASY_AGG_HIST, nm);				\
	klasy_agg_hist(KLASY_THIS_ASPECT, &__klasy_desc, (s64)(v));	\
} while (0)

#define __KLASY_LHIST(nm, v, l, h, s) do {				\
	_Static_assert((s) > 0, "LHIST: step must be above 0");	\
	_Static_assert((h) > (l), "LHIST: hi must be above lo");	\
	_Static_assert(((h) - (l)) % (s) == 0,				\
		       "LHIST: hi - lo must be a multiple of step");	\
	_Static_assert(((h) - (l)) / (s) <= KLASY_AGG_LHIST_MAX,	\
		       "LHIST: at most 1000 buckets");			\
	__KLASY_DESC(KLASY_AGG_LHIST, nm, .lo = (l), .hi = (h), .step = (s)); \
	klasy_agg_hist(KLASY_THIS_ASPECT, &__klasy_desc, (s64)(v));	\
} while (0)

#define __KLASY_TIMER(fn, nm) do {					\
	__KLASY_DESC(KLASY_AGG_TIMER, nm);				\
	fn(KLASY_THIS_ASPECT, &__klasy_desc);				\
} while (0)

#define COUNT(key)			__KLASY_KEYED(KLASY_AGG_COUNT, NULL, key, 1)
#define SUM(key, v)			__KLASY_KEYED(KLASY_AGG_SUM, NULL, key, v)
#define MINIMUM(key, v)			__KLASY_KEYED(KLASY_AGG_MIN, NULL, key, v)
#define MAXIMUM(key, v)			__KLASY_KEYED(KLASY_AGG_MAX, NULL, key, v)
#define HIST(v)				__KLASY_HIST(NULL, v)
#define LHIST(v, lo, hi, step)		__KLASY_LHIST(NULL, v, lo, hi, step)
#define COUNT_AS(name, key)		__KLASY_KEYED(KLASY_AGG_COUNT, #name, key, 1)
#define SUM_AS(name, key, v)		__KLASY_KEYED(KLASY_AGG_SUM, #name, key, v)
#define MINIMUM_AS(name, key, v)	__KLASY_KEYED(KLASY_AGG_MIN, #name, key, v)
#define MAXIMUM_AS(name, key, v)	__KLASY_KEYED(KLASY_AGG_MAX, #name, key, v)
#define HIST_AS(name, v)		__KLASY_HIST(#name, v)
#define LHIST_AS(name, v, lo, hi, step)	__KLASY_LHIST(#name, v, lo, hi, step)
#define TIMER_START(name)		__KLASY_TIMER(klasy_timer_start, #name)
#define TIMER_STOP(name)		__KLASY_TIMER(klasy_timer_stop, #name)

/*
 * Kernel stacks (klasy_stack.c), as BPF's STACK_TRACE map and bpftrace's
 * kstack: STACK_ID() saves the probed context's kernel stack (at most
 * KLASY_STACK_DEPTH return addresses, innermost first: from the hit's
 * registers where the hook has them, else from the advice, klasy's own
 * frames dropped by the host) into the runtime's table of stacks and is
 * its id, a 64-bit hash of the frames. An id names the same stack for
 * as long as the runtime is loaded; a stack the full table could not
 * keep is counted (stacks file, full=N) and its id, still apart from
 * other stacks', prints without frames. COUNT_STACK(name) counts hits
 * per stack (bpftrace's @name[kstack] = count()): klasy stats prints
 * each stack's frames, symbolized, then its count, or with --folded
 * "root;...;leaf count" for flame graph tools.
 */
#define KLASY_STACK_DEPTH 32

/* Kinds of keys, as the typed values of a record number them. */
#define KLASY_KEY_INT 0
#define KLASY_KEY_KSTACK KLASY_VAL_KSTACK

u64 klasy_stack_id(void);

#define STACK_ID() klasy_stack_id()

/*
 * STORE_STACK() records the stack's id in the hit's record, a typed
 * value (KLASY_VAL_KSTACK); klasy trace prints its frames.
 */
static inline void klasy_store_stack(struct klasy_hit *hit)
{
	u64 *p = klasy_store_blob(hit, KLASY_VAL_KSTACK, sizeof(u64));

	if (p)
		*p = klasy_stack_id();
}

#define STORE_STACK() klasy_store_stack(__klasy_hit)
#define COUNT_STACK(name) do {						\
	__KLASY_DESC(KLASY_AGG_COUNT, #name, .keykind = KLASY_KEY_KSTACK); \
	klasy_agg_keyed(KLASY_THIS_ASPECT, &__klasy_desc, klasy_stack_id(), 1); \
} while (0)

/*
 * The _BY forms. KEY_STR and KEY_USTR make a pointer of a type of their
 * own, which _Generic tells from an integer; the argument counting
 * macros split "keys..., value" (C has no way to take a variadic
 * macro's last argument but by counting).
 */
struct klasy_kstr;
struct klasy_ustr;
struct klasy_kstack;
#define KEY_STR(p)	((const struct klasy_kstr *)(unsigned long)(p))
#define KEY_USTR(p)	((const struct klasy_ustr *)(unsigned long)(p))
#define KEY_KSTACK()	((const struct klasy_kstack *)(unsigned long)klasy_stack_id())

#define __KLASY_CAT_(a, b) a##b
#define __KLASY_CAT(a, b) __KLASY_CAT_(a, b)
#define __KLASY_CALL(m, ...) m(__VA_ARGS__)
#define __KLASY_NARGS(...) \
	__KLASY_NARGS_(__VA_ARGS__, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define __KLASY_NARGS_(a1, a2, a3, a4, a5, a6, a7, a8, a9, n, ...) n

#define __KLASY_KADD(k, x) _Generic((x),				\
	const struct klasy_kstr *:					\
		klasy_key_add(k, KLASY_VAL_KSTR, (u64)(unsigned long)(x)), \
	const struct klasy_ustr *:					\
		klasy_key_add(k, KLASY_VAL_USTR, (u64)(unsigned long)(x)), \
	const struct klasy_kstack *:					\
		klasy_key_add(k, KLASY_VAL_KSTACK, (u64)(unsigned long)(x)), \
	default: klasy_key_add(k, 0, (u64)(x)))
#define __KLASY_KEYS1(k, a) __KLASY_KADD(k, a)
#define __KLASY_KEYS2(k, a, b) (__KLASY_KEYS1(k, a), __KLASY_KADD(k, b))
#define __KLASY_KEYS3(k, a, b, c) (__KLASY_KEYS2(k, a, b), __KLASY_KADD(k, c))
#define __KLASY_KEYS4(k, a, b, c, d) (__KLASY_KEYS3(k, a, b, c), __KLASY_KADD(k, d))

/* "keys..., v" as "v, keys...", and "keys..., v, lo, hi, step" likewise. */
#define __KLASY_V2(a, v) v, a
#define __KLASY_V3(a, b, v) v, a, b
#define __KLASY_V4(a, b, c, v) v, a, b, c
#define __KLASY_V5(a, b, c, d, v) v, a, b, c, d
#define __KLASY_VFIRST(...) \
	__KLASY_CAT(__KLASY_V, __KLASY_NARGS(__VA_ARGS__))(__VA_ARGS__)
#define __KLASY_L5(a, v, l, h, s) v, l, h, s, a
#define __KLASY_L6(a, b, v, l, h, s) v, l, h, s, a, b
#define __KLASY_L7(a, b, c, v, l, h, s) v, l, h, s, a, b, c
#define __KLASY_L8(a, b, c, d, v, l, h, s) v, l, h, s, a, b, c, d
#define __KLASY_LFIRST(...) \
	__KLASY_CAT(__KLASY_L, __KLASY_NARGS(__VA_ARGS__))(__VA_ARGS__)

#define __KLASY_BY_UPDATE(v, ...) do {					\
	struct klasy_key __klasy_key = {};				\
	s64 __klasy_v = (s64)(v);					\
	__KLASY_CAT(__KLASY_KEYS, __KLASY_NARGS(__VA_ARGS__))(&__klasy_key, __VA_ARGS__); \
	klasy_agg_by(KLASY_THIS_ASPECT, &__klasy_desc, &__klasy_key, __klasy_v); \
} while (0)

#define __KLASY_BY(k, nm, v, ...) do {					\
	__KLASY_DESC(k, nm, .by = 1);					\
	__KLASY_BY_UPDATE(v, __VA_ARGS__);				\
} while (0)

#define __KLASY_LBY(nm, v, l, h, s, ...) do {				\
	_Static_assert((s) > 0, "LHIST_BY: step must be above 0");	\
	_Static_assert((h) > (l), "LHIST_BY: hi must be above lo");	\
	_Static_assert(((h) - (l)) % (s) == 0,				\
		       "LHIST_BY: hi - lo must be a multiple of step");	\
	_Static_assert(((h) - (l)) / (s) <= KLASY_AGG_LHIST_MAX,	\
		       "LHIST_BY: at most 1000 buckets");		\
	__KLASY_DESC(KLASY_AGG_LHIST, nm, .lo = (l), .hi = (h), .step = (s), .by = 1); \
	__KLASY_BY_UPDATE(v, __VA_ARGS__);				\
} while (0)

#define COUNT_BY(name, ...) __KLASY_BY(KLASY_AGG_COUNT, #name, 1, __VA_ARGS__)
#define SUM_BY(name, ...) \
	__KLASY_CALL(__KLASY_BY, KLASY_AGG_SUM, #name, __KLASY_VFIRST(__VA_ARGS__))
#define MINIMUM_BY(name, ...) \
	__KLASY_CALL(__KLASY_BY, KLASY_AGG_MIN, #name, __KLASY_VFIRST(__VA_ARGS__))
#define MAXIMUM_BY(name, ...) \
	__KLASY_CALL(__KLASY_BY, KLASY_AGG_MAX, #name, __KLASY_VFIRST(__VA_ARGS__))
#define HIST_BY(name, ...) \
	__KLASY_CALL(__KLASY_BY, KLASY_AGG_HIST, #name, __KLASY_VFIRST(__VA_ARGS__))
#define LHIST_BY(name, ...) \
	__KLASY_CALL(__KLASY_LBY, #name, __KLASY_LFIRST(__VA_ARGS__))
#define TIMER_START_BY(name, ...) do {					\
	__KLASY_DESC(KLASY_AGG_TIMER, #name, .by = 1);			\
	struct klasy_key __klasy_key = {};				\
	__KLASY_CAT(__KLASY_KEYS, __KLASY_NARGS(__VA_ARGS__))(&__klasy_key, __VA_ARGS__); \
	klasy_timer_start_by(KLASY_THIS_ASPECT, &__klasy_desc, &__klasy_key); \
} while (0)
#define TIMER_STOP_BY(name) do {					\
	__KLASY_DESC(KLASY_AGG_TIMER, #name, .by = 1);			\
	klasy_timer_stop(KLASY_THIS_ASPECT, &__klasy_desc);		\
} while (0)

/*
 * Per-call variables (bpftrace's @start[tid]): CALL_SET(name, v) in the
 * before advice at the entry of a function (execution(f)) keeps v for
 * that call, and CALL_GET(name) in its after advice (on the call's
 * return) reads it back; name is an identifier, values are u64, at most
 * KLASY_CALL_VARS names per aspect. A call is known by its frame: the
 * CFA, the stack pointer before the call pushed its return address (the
 * probed SP + 8 at the entry, the probed SP on return). So a recursive
 * or nested call, deeper on the stack, has values of its own and never
 * sees the outer call's, and CALL_GET of a name the call did not set is
 * 0. At other hooks (an inlined copy, a line, an access) and off the
 * task's stack (an interrupt), CALL_SET keeps nothing and CALL_GET is 0.
 *
 * The entry hook opens the call's frame (klasy_call_begin) and drops the
 * task's frames at its CFA or below: those calls have returned, so a
 * return a kretprobe missed leaves nothing past the task's next call at
 * that depth or above (TIMER_START's rule). The return hook closes the
 * frame after the advice. Bounds: KLASY_CALL_DEPTH open calls per task
 * (a new one drops the oldest), KLASY_AGG_TASKS tasks (a task whose
 * newest call is older than a minute gives its slot up, as in a timer).
 * An access that finds the task's slot held by another CPU (a task
 * taking it over) keeps or reads nothing, counted in klasy_calls.missed;
 * a call that finds no slot, in klasy_calls.full; a call's frame thrown
 * away before its return closed it (its task's slot taken over, the
 * task exited, the oldest past KLASY_CALL_DEPTH), in klasy_calls.dropped:
 * if that call still returns, its CALL_GET reads 0 (klasy status). An
 * entry the aspect does not also hook on return opens no call: no return
 * would close it, so CALL_SET keeps nothing there.
 */
#define KLASY_CALL_VARS 8
#define KLASY_CALL_DEPTH 8

struct klasy_call_frame {
	unsigned long cfa;
	u64 t0;				/* when it was opened */
	u32 set;			/* bit i: variable i was set */
	u64 v[KLASY_CALL_VARS];
};

struct klasy_call_task {
	/*
	 * Its task_struct (bits 3 up, 0: free); bit 0 set while a handler
	 * holds the slot (cmpxchg: its task's, or another's taking it over
	 * from another CPU), bits 1-2 count its unlocks, kept while free
	 * (klasy_call.c).
	 */
	unsigned long task;
	u64 birth;			/* its start_time */
	unsigned int n;			/* open frames */
	struct klasy_call_frame f[KLASY_CALL_DEPTH];
};

/*
 * An aspect's per-call variables: static in its advice module, named by
 * its struct klasy_aspect. missed: begins, ends, sets and gets that found
 * the task's slot busy (kept or read nothing); full: calls opened with no
 * slot free for their task (their CALL_SET kept nothing); dropped: frames
 * thrown away before their return: a slot another task took over after a
 * minute without a new call (its task exited, its returns were missed, or
 * it is still blocked in one), a reused task_struct's, the oldest of a
 * task past KLASY_CALL_DEPTH.
 */
struct klasy_calls {
	atomic_long_t missed;
	atomic_long_t full;
	atomic_long_t dropped;
	struct klasy_call_task t[KLASY_AGG_TASKS];
};

unsigned long klasy_call_begin(struct klasy_calls *c, unsigned long cfa);
void klasy_call_end(struct klasy_calls *c, unsigned long cfa);
void klasy_call_set(struct klasy_calls *c, unsigned int var, u64 v);
u64 klasy_call_get(struct klasy_calls *c, unsigned int var);

/* __klasy_call_NAME: the generated module numbers the aspect's names. */
#define CALL_SET(name, v)	klasy_call_set(&klasy_calls, __klasy_call_##name, (u64)(v))
#define CALL_GET(name)		klasy_call_get(&klasy_calls, __klasy_call_##name)

/*
 * Shared maps (bpftrace's @start[tid] between two functions): a map of
 * u64 values by key that every advice of the aspect reads and writes,
 * on every CPU, until the aspect is unwoven. Keys are those of the _BY
 * forms (1 to KLASY_KEY_VALUES values, KEY_STR, KEY_USTR):
 *
 *   MAP_SET(name, v, key...)          keeps v under key
 *   MAP_GET(name, key...)             the value, 0 if key is absent
 *   MAP_GET_OR(name, dflt, key...)    the value, dflt if key is absent
 *   MAP_DELETE(name, key...)          removes key: true if it was there
 *
 * name is an identifier; the generated module numbers the aspect's
 * names (at most KLASY_SMAP_MAX). Each map holds KLASY_SMAP_ENTRIES
 * keys, or as many as MAP_SIZE(name, n) in any advice of the aspect
 * says (a literal n, 1 to KLASY_SMAP_MAX_ENTRIES: the generator reads
 * it; the macro does nothing), in twice as many slots preallocated when
 * the aspect registers,
 * KLASY_SMAP_WAYS a hash bucket: a MAP_SET of a new key past the bound,
 * or whose bucket is full (seldom below the bound), or whose key has no
 * room for its values, keeps nothing and is counted (overflow, klasy
 * stats). A bucket is locked (raw spinlock, interrupts off) for
 * the few loads and stores of one operation; in NMI context (an int3
 * kprobe's handler on x86 too) it is only trylocked, a bounded number
 * of times, and an operation that still finds it locked is counted
 * (busy) and does nothing (MAP_GET: absent).
 */
#define KLASY_SMAP_MAX 8
#define KLASY_SMAP_WAYS 16
#define KLASY_SMAP_ENTRIES 4096
#define KLASY_SMAP_MAX_ENTRIES 65536

void klasy_smap_set(struct klasy_aspect *a, unsigned int map,
		    const struct klasy_key *k, u64 v);
bool klasy_smap_get(struct klasy_aspect *a, unsigned int map,
		    const struct klasy_key *k, u64 *v);
bool klasy_smap_delete(struct klasy_aspect *a, unsigned int map,
		       const struct klasy_key *k);

#define __KLASY_SMAP_KEY(...)						\
	struct klasy_key __klasy_key = {};				\
	__KLASY_CAT(__KLASY_KEYS, __KLASY_NARGS(__VA_ARGS__))(&__klasy_key, __VA_ARGS__)

/* __klasy_map_NAME: the generated module numbers the aspect's names. */
#define MAP_SET(name, v, ...) do {					\
	u64 __klasy_v = (u64)(v);					\
	__KLASY_SMAP_KEY(__VA_ARGS__);					\
	klasy_smap_set(KLASY_THIS_ASPECT, __klasy_map_##name,		\
		       &__klasy_key, __klasy_v);			\
} while (0)
#define MAP_GET_OR(name, dflt, ...) ({					\
	u64 __klasy_v = (u64)(dflt);					\
	__KLASY_SMAP_KEY(__VA_ARGS__);					\
	klasy_smap_get(KLASY_THIS_ASPECT, __klasy_map_##name,		\
		       &__klasy_key, &__klasy_v);			\
	__klasy_v;							\
})
#define MAP_GET(name, ...) MAP_GET_OR(name, 0, __VA_ARGS__)
#define MAP_SIZE(name, n) ((void)__klasy_map_##name)
#define MAP_DELETE(name, ...) ({					\
	__KLASY_SMAP_KEY(__VA_ARGS__);					\
	klasy_smap_delete(KLASY_THIS_ASPECT, __klasy_map_##name,	\
			  &__klasy_key);				\
})

#endif /* _KLASY_RT_H */
