/* SPDX-License-Identifier: GPL-2.0 */
/*
 * klasy_rt.h - the ABI between the klasy runtime module (klasy_runtime.ko)
 * and the advice modules klasy generates, one per woven aspect.
 *
 * An advice module fills a struct klasy_aspect with one struct klasy_hook
 * per hook (an address and a kind: kprobe before, kretprobe after), each
 * with the module's own handler (the trampoline that computes the context
 * variables and calls that hook's advice in aspect order), and registers
 * it with klasy_register_aspect() from its init function: all hooks or
 * none. Its exit function calls klasy_unregister_aspect(). The runtime
 * keeps the trace buffer (the kernel's ring buffer), counts hits, misses
 * and lost records, and shows all of it in debugfs:
 *
 *   /sys/kernel/debug/klasy/records  read: consumes whole records (below)
 *   /sys/kernel/debug/klasy/status   read: the runtime, aspects and hooks
 *
 * The Go side reads both (weaver/records); a test compiles this header
 * and checks the record layout against the Go decoder through DWARF.
 */
#ifndef _KLASY_RT_H
#define _KLASY_RT_H

#include <linux/types.h>
#include <linux/kprobes.h>
#include <linux/list.h>
#include <linux/percpu.h>
#include <asm/msr.h>		/* rdtsc() for DO_RDTSC */

/* Bumped on any change to what follows; status shows it as abi=N. */
#define KLASY_ABI_VERSION 2

/* Values one advice may store per hit; more are counted as dropped. */
#define KLASY_MAX_VALUES 16

/* Hooks one aspect may have: a record's hook index is 16 bits. */
#define KLASY_MAX_HOOKS 65536

/*
 * One record in the records file, little-endian: this 40-byte header,
 * then nvals u64 values, so every record is a multiple of 8 bytes long.
 * A read returns whole records only, oldest first across CPUs (by
 * time_ns), 0 when none are left, and -EINVAL when the buffer it is given
 * cannot hold the next record (KLASY_RECORD_MAX bytes always can).
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
	__u64 vals[];
};

#define KLASY_RECORD_MAX (sizeof(struct klasy_record) + KLASY_MAX_VALUES * sizeof(__u64))

/* What one advice stored during one hit. */
struct klasy_hit {
	unsigned int n;
	unsigned int dropped;
	u64 vals[KLASY_MAX_VALUES];
};

/*
 * The hit being recorded on this CPU. One per CPU is enough: the kernel
 * runs at most one kprobe handler per CPU at a time (a probe hit while
 * current_kprobe is set, from an interrupt or NMI too, is counted in
 * nmissed and its handler not run; kretprobe handlers likewise). Keeping
 * it off the handler's stack spares every hit the zeroing of a 136-byte
 * local (CONFIG_INIT_STACK_ALL_ZERO) and a stack canary check.
 */
DECLARE_PER_CPU(struct klasy_hit, klasy_hit);

enum klasy_hook_kind {
	KLASY_HOOK_KPROBE = 0,	  /* before: a kprobe at addr */
	KLASY_HOOK_KRETPROBE = 1, /* after an out-of-line function returns */
};

/*
 * One hook. The advice module fills everything above "runtime's"; for a
 * kprobe it sets rp.kp.addr and rp.kp.pre_handler (and rp.kp.post_handler
 * for after advice at an instruction), for a kretprobe
 * rp.kp.addr, rp.handler and optionally rp.entry_handler/rp.data_size.
 * The runtime sets rp.kp.flags. Strings are shown in status with spaces
 * and control characters as '_', NULL or "" as "-".
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

	/* runtime's */
	struct klasy_aspect *aspect;
	unsigned int index;
};

struct klasy_aspect {
	const char *name;		/* the aspect's name (file name) */
	struct module *owner;		/* THIS_MODULE */
	unsigned int nhooks;
	struct klasy_hook *hooks;

	/* runtime's */
	u32 id;				/* from 1, never reused while loaded */
	u64 __percpu *hits;		/* nhooks counters per CPU */
	struct list_head node;
	struct kprobe **kps;		/* the kprobes, for one batch */
	struct kretprobe **rps;		/* the kretprobes, for one batch */
	unsigned int nkps, nrps;
	u64 register_ns;		/* time klasy_register_aspect took */
};

/*
 * klasy_register_aspect registers every hook of a, all or nothing: on
 * failure nothing stays registered and the error is returned (the
 * kernel's: -EINVAL for a refused address, -EILSEQ for one that is not an
 * instruction boundary, ...), with the failing hook's index in *failed,
 * or a->nhooks when no hook is to blame (-ENOMEM, no or too many hooks).
 * failed may be NULL. Hooks are registered disabled and enabled once all
 * are in. Call it from the advice module's init, and
 * klasy_unregister_aspect from its exit (it waits for running handlers).
 */
int klasy_register_aspect(struct klasy_aspect *a, unsigned int *failed);
void klasy_unregister_aspect(struct klasy_aspect *a);

/* klasy_emit appends one record for this hit if the advice stored any value. */
void klasy_emit(struct klasy_hook *h, u16 advice, const struct klasy_hit *hit);

/* klasy_count_hit counts one hit of hook h on this CPU (preemption is off). */
static inline void klasy_count_hit(struct klasy_hook *h)
{
	__this_cpu_inc(h->aspect->hits[h->index]);
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

#define STORE_DATA(x) klasy_store(__klasy_hit, (u64)(x))
#define STORE_DATA1(a) STORE_DATA(a)
#define STORE_DATA2(a, b) do { STORE_DATA(a); STORE_DATA(b); } while (0)
#define STORE_DATA3(a, b, c) do { STORE_DATA2(a, b); STORE_DATA(c); } while (0)
#define STORE_DATA4(a, b, c, d) do { STORE_DATA3(a, b, c); STORE_DATA(d); } while (0)
#define STORE_DATA5(a, b, c, d, e) do { STORE_DATA4(a, b, c, d); STORE_DATA(e); } while (0)
#define STORE_DATA6(a, b, c, d, e, f) do { STORE_DATA5(a, b, c, d, e); STORE_DATA(f); } while (0)
#define STORE_DATA7(a, b, c, d, e, f, g) do { STORE_DATA6(a, b, c, d, e, f); STORE_DATA(g); } while (0)
#define STORE_DATA8(a, b, c, d, e, f, g, h) do { STORE_DATA7(a, b, c, d, e, f, g); STORE_DATA(h); } while (0)

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
 * The functions run in any context (task, softirq, hardirq); lookups
 * take no lock. In NMI context register and remove are dropped (and
 * counted): they allocate and lock.
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

#define KLASY_DECLARE_FLOW(flow) static struct klasy_flow *__klasy_flow_##flow
#define KLASY_FLOW_GET(flow) klasy_flow_get(#flow, &__klasy_flow_##flow)
#define KLASY_FLOW_PUT(flow) klasy_flow_put(__klasy_flow_##flow)

/* A fresh, non-zero ID, unique among the domains of one weave. */
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
/* klasy_flow_abi: end */

#endif /* _KLASY_RT_H */
