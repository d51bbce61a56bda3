// SPDX-License-Identifier: GPL-2.0
//go:build ignore

/*
 * klasy_stack - the kernel stacks advice names by id, part of
 * klasy_runtime.ko, as BPF's STACK_TRACE map: STACK_ID() (klasy_rt.h)
 * saves the probed context's kernel stack into one table the runtime
 * keeps, keyed by a hash of its frames, and returns that hash as the
 * stack's id, which advice records (STORE_STACK) or counts by
 * (COUNT_STACK). The host reads the frames back from
 *
 *   /sys/kernel/debug/klasy/stacks
 *
 * and symbolizes them. The table is bounded: an entry, once published,
 * is never overwritten or freed while the runtime is loaded; a stack
 * that finds no free slot near its hash is counted as full, and its id
 * is returned all the same, so counts by it stay apart from others'.
 * Another stack with a published stack's id (a 64-bit hash collision)
 * is counted as a collision: its counts go with the first one's.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/debugfs.h>
#include <linux/jhash.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/percpu.h>
#include <linux/sched.h>
#include <linux/seq_file.h>
#include <linux/string.h>
#include <asm/unwind.h>

#include "klasy_internal.h"

#define KLASY_STACK_BITS 12
#define KLASY_STACKS (1 << KLASY_STACK_BITS)	/* entries in the table */
#define KLASY_STACK_PROBES 8	/* slots a stack may take from its hash on */

struct klasy_stack {
	u64 id;		/* 0: free; published (release) after the frames */
	u64 claim;	/* the id a writer took the slot for (cmpxchg); 0: none */
	u32 nr;		/* frames */
	unsigned long ip[KLASY_STACK_DEPTH];
};

static struct klasy_stack *klasy_stacks;
static atomic_t klasy_stacks_used;
static atomic_long_t klasy_stacks_full;
static atomic_long_t klasy_stacks_collisions;

/*
 * The frames being hashed on this CPU: one klasy handler runs per CPU
 * at a time (klasy_enter), and a handler may run on the 4 KiB NMI stack.
 */
static DEFINE_PER_CPU(unsigned long[KLASY_STACK_DEPTH], klasy_stack_scratch);

/*
 * The probed context's return addresses, innermost first, as
 * stack_trace_save_regs gives them (arch_stack_walk: regs->ip, then the
 * unwinder from the regs frame), which the kernel does not export. With
 * no regs (a tracepoint's probe) from here, less the runtime's own
 * frames; the advice module's are left to the host, which drops them.
 */
static unsigned int klasy_stack_walk(struct pt_regs *regs, unsigned long *ip)
{
	struct unwind_state state;
	unsigned long addr;
	unsigned int n = 0;

	if (regs)
		ip[n++] = regs->ip;
	for (unwind_start(&state, current, regs, NULL);
	     !unwind_done(&state) && n < KLASY_STACK_DEPTH;
	     unwind_next_frame(&state)) {
		addr = unwind_get_return_address(&state);
		if (!addr)
			break;
		if (!regs && !n && within_module(addr, THIS_MODULE))
			continue;
		ip[n++] = addr;
	}
	return n;
}

/*
 * Publishes the nr frames ip under id, unless the table holds them
 * already. A slot is claimed for one id and never given up, and every
 * writer of an id probes the same slots in the same order, so an id is
 * in one slot at most: a writer that finds its id claimed by another
 * that is still copying leaves the copy to it, and one that finds other
 * frames under its id (two stacks with one 64-bit hash) counts a
 * collision and keeps the first.
 */
static void klasy_stack_put(u64 id, const unsigned long *ip, unsigned int nr)
{
	unsigned int i = id & (KLASY_STACKS - 1), p;
	struct klasy_stack *s;
	u64 c;

	for (p = 0; p < KLASY_STACK_PROBES; p++) {
		s = &klasy_stacks[(i + p) & (KLASY_STACKS - 1)];
		/* Pairs with the release below: an id seen, its frames are. */
		if (smp_load_acquire(&s->id) == id) {
			if (s->nr != nr || memcmp(s->ip, ip, nr * sizeof(*ip)))
				atomic_long_inc(&klasy_stacks_collisions);
			return;
		}
		c = READ_ONCE(s->claim);
		if (!c)
			c = cmpxchg(&s->claim, 0, id);
		if (c == id)
			return;	/* being published by another writer */
		if (c)
			continue;
		memcpy(s->ip, ip, nr * sizeof(*ip));
		s->nr = nr;
		/* Readers that see the id see the frames. */
		smp_store_release(&s->id, id);
		atomic_inc(&klasy_stacks_used);
		return;
	}
	atomic_long_inc(&klasy_stacks_full);
}

u64 klasy_stack_id(void)
{
	struct klasy_hit *hit = this_cpu_ptr(&klasy_hit);
	unsigned long *ip = this_cpu_ptr(klasy_stack_scratch);
	unsigned int nr = klasy_stack_walk(hit->regs, ip);
	u32 words = nr * sizeof(*ip) / sizeof(u32);
	u64 id;

	id = (u64)jhash2((u32 *)ip, words, 0x6b6c6173) << 32 |
	     jhash2((u32 *)ip, words, nr);
	if (!id)
		id = 1;
	if (klasy_stacks)
		klasy_stack_put(id, ip, nr);
	return id;
}
EXPORT_SYMBOL_GPL(klasy_stack_id);

/*
 * "stacks abi=N depth=D room=R used=U full=F collisions=C", then a line
 * per stack: "stack id=ID frames=HEX,HEX,..." (running addresses,
 * innermost first). full: saves that found no room; collisions: saves
 * of other frames under an id the table holds (theirs are not kept).
 */
static int klasy_stacks_show(struct seq_file *sf, void *unused)
{
	unsigned int i, j;
	u64 id;

	seq_printf(sf, "stacks abi=%d depth=%d room=%d used=%d full=%ld collisions=%ld\n",
		   KLASY_ABI_VERSION, KLASY_STACK_DEPTH, KLASY_STACKS,
		   atomic_read(&klasy_stacks_used),
		   atomic_long_read(&klasy_stacks_full),
		   atomic_long_read(&klasy_stacks_collisions));
	for (i = 0; klasy_stacks && i < KLASY_STACKS; i++) {
		struct klasy_stack *s = &klasy_stacks[i];

		/* Pairs with klasy_stack_id's release: the frames are whole. */
		id = smp_load_acquire(&s->id);
		if (!id)
			continue;
		seq_printf(sf, "stack id=%llu frames=", id);
		for (j = 0; j < s->nr; j++)
			seq_printf(sf, "%s%lx", j ? "," : "", s->ip[j]);
		seq_puts(sf, s->nr ? "\n" : "-\n");
	}
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(klasy_stacks);

int klasy_stack_init(struct dentry *dir)
{
	klasy_stacks = kvcalloc(KLASY_STACKS, sizeof(*klasy_stacks), GFP_KERNEL);
	if (!klasy_stacks)
		return -ENOMEM;
	debugfs_create_file("stacks", 0400, dir, NULL, &klasy_stacks_fops);
	return 0;
}

void klasy_stack_exit(void)
{
	kvfree(klasy_stacks);
	klasy_stacks = NULL;
}
