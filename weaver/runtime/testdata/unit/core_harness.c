// SPDX-License-Identifier: GPL-2.0
/*
 * core_harness - klasy_core.c's trace buffer writer (klasy_emit), its
 * records reader (records_read) and its check of a replacement's kprobe
 * (klasy_check_replace), taken out of the source by unit_test.go into
 * core_extract.c and run on kern_user.h's stand-ins:
 *
 *   core_harness < SCRIPT
 *
 * Script lines (# starts a comment):
 *
 *   cpu N              run on CPU N from now on
 *   emit V             a hook's advice stores V: klasy_emit
 *   buffer N           make each CPU's trace buffer N bytes (first line)
 *   irq V              raise an interrupt whose hook stores V: it comes
 *                      in the next handler, right before the stamp,
 *                      where kprobes counts the hit as missed (a handler
 *                      runs with current_kprobe set)
 *   missed N           the interrupts' hits kprobes counted missed
 *   open               open the records file (its time cut-off)
 *   read SIZE RET [fault]  read(2) of SIZE bytes returns RET (a byte
 *                      count or -errno); with fault, the user's buffer
 *                      faults. Every record read is checked to be no
 *                      older than the one read before it
 *   got V...           the values of the records read since the last got
 *   lost N...          the lost count of each CPU
 *   unread N           the records written and not read, all CPUs
 *   replace SPEC RET   klasy_check_replace of a replacement at an address
 *                      where kprobes has SPEC ('-': the replacement alone;
 *                      letters: a an aggregate kprobe, o a kretprobe of
 *                      the same aspect under it, f a foreign kprobe under
 *                      it, p the aggregate has a post_handler) returns RET
 *
 * A failed check prints "line N: ..." and exits 1.
 */
#include <inttypes.h>
#include <stdarg.h>

#include "kern_user.h"
#include "script.h"

/* What klasy_check_replace sees of kprobes and of klasy_rt.h. */
struct kprobe {
	struct list_head list;
	void *addr;
	unsigned int flags;
	void (*post_handler)(void);
};
#define KPROBE_FLAG_FTRACE 8
#define kprobe_ftrace(kp) ((kp)->flags & KPROBE_FLAG_FTRACE)
struct kretprobe {
	struct kprobe kp;
};
struct klasy_aspect;
struct klasy_hook {
	struct kretprobe rp;
	const char *function;
	unsigned int index;
	struct klasy_aspect *aspect;
};
struct klasy_aspect {
	const char *name;
	unsigned int nhooks;
	struct klasy_hook *hooks;
	u32 id;
};
#define PAGE_SIZE 4096
/* Per-CPU data: an array of KLASY_USER_CPUS, the pointer its first. */
#define ____cacheline_aligned __attribute__((aligned(64)))
#undef this_cpu_ptr
#define this_cpu_ptr(p) ((p) + klasy_user_cpu)
#define per_cpu_ptr(p, cpu) ((p) + (cpu))
#define DEFINE_MUTEX(m) struct mutex m

#include "core_extract.c"

/* ---- kern_user.h's stand-ins ---- */

int klasy_user_cpu;
struct task_struct *klasy_user_current;
static u64 clock_ns = 1000;
static bool fault;
static u64 irq_val;
static bool irq_pending;
/* kprobes' per-CPU current_kprobe, and the hits it counted missed. */
static bool kprobe_running;
static unsigned int missed;

static void irq_point(void);

u64 ktime_get_mono_fast_ns(void)
{
	/* An interrupt may come before the stamp. */
	irq_point();
	return clock_ns++;
}

u64 sched_clock_cpu(int cpu)
{
	return clock_ns;
}

unsigned long copy_to_user(void __user *to, const void *from, unsigned long n)
{
	if (fault)
		return n;
	memcpy(to, from, n);
	return 0;
}

static struct klasy_aspect aspect = { .name = "unit", .id = 1 };
static struct klasy_hook hook = { .aspect = &aspect };

/*
 * A hit of a klasy hook: kprobes runs the handler, which calls klasy_emit
 * as the generated module's do, unless a handler runs on the CPU already.
 */
static void hook_hit(u64 v)
{
	struct klasy_hit hit = { .n = 1 };

	if (kprobe_running) {
		missed++;
		return;
	}
	kprobe_running = true;
	hit.vals[0] = v;
	klasy_emit(&hook, 1, &hit);
	kprobe_running = false;
}

/* Where an interrupt can come: it hits a hook. */
static void irq_point(void)
{
	if (!irq_pending)
		return;
	irq_pending = false;
	hook_hit(irq_val);
}

#define EVENTS 1024

/* Each CPU's trace buffer, of size bytes. */
static void buffers(unsigned long size)
{
	int cpu;

	if (!klasy_bufs) {
		klasy_bufs = aligned_alloc(64, KLASY_USER_CPUS * sizeof(*klasy_bufs));
		memset(klasy_bufs, 0, KLASY_USER_CPUS * sizeof(*klasy_bufs));
	}
	for (cpu = 0; cpu < KLASY_USER_CPUS; cpu++) {
		free(klasy_bufs[cpu].data);
		memset(&klasy_bufs[cpu], 0, sizeof(klasy_bufs[cpu]));
		klasy_bufs[cpu].size = size;
		klasy_bufs[cpu].data = malloc(size + KLASY_RECORD_MAX);
	}
}

/* ---- script ---- */

static long long num(const char *s)
{
	char *end;
	long long v;

	if (!s)
		fail("missing number");
	v = strtoll(s, &end, 0);
	if (!*s || *end)
		fail("%s: not a number", s);
	return v;
}

static u64 got[EVENTS], last_time;
static int ngot;

static void post_handler(void)
{
}

static int replace(const char *spec)
{
	struct klasy_hook hooks[2] = { { .function = "f" }, { .function = "f", .index = 1 } };
	struct klasy_aspect a = { .name = "unit", .nhooks = 2, .hooks = hooks };
	struct kprobe agg = { 0 }, foreign = { 0 };
	struct kprobe *kp = &hooks[0].rp.kp;

	kp->flags = KPROBE_FLAG_FTRACE;
	if (strchr(spec, 'p'))
		agg.post_handler = post_handler;
	kp->list.next = kp->list.prev = &kp->list;
	if (strchr(spec, 'a')) {
		/* The aggregate's list is the head of its kprobes'. */
		struct kprobe *under[3];
		int n = 0, i;

		under[n++] = kp;
		if (strchr(spec, 'o'))
			under[n++] = &hooks[1].rp.kp;
		if (strchr(spec, 'f'))
			under[n++] = &foreign;
		agg.list.next = &under[0]->list;
		for (i = 0; i < n; i++) {
			under[i]->list.prev = i ? &under[i - 1]->list : &agg.list;
			under[i]->list.next = i < n - 1 ? &under[i + 1]->list : &agg.list;
		}
		agg.list.prev = &under[n - 1]->list;
	}
	return klasy_check_replace(&a, &hooks[0]);
}

int main(void)
{
	char line[1024], *args[SCRIPT_ARGS];
	struct task_struct task = { .pid = 42, .comm = "unit" };
	struct file file = { 0 };
	static char ubuf[1 << 16];
	int nargs, i;

	klasy_user_current = &task;
	buffers(1 << 16);
	klasy_bounce = malloc(KLASY_BOUNCE_SIZE);
	klasy_heads = calloc(KLASY_USER_CPUS, sizeof(*klasy_heads));
	file.private_data = (void *)(unsigned long)ktime_get_mono_fast_ns();
	while (fgets(line, sizeof(line), stdin)) {
		line_no++;
		nargs = script_args(line, args);
		if (!nargs)
			continue;
		if (!strcmp(args[0], "buffer")) {
			buffers(num(args[1]));
		} else if (!strcmp(args[0], "cpu")) {
			klasy_user_cpu = num(args[1]);
		} else if (!strcmp(args[0], "emit")) {
			hook_hit(num(args[1]));
		} else if (!strcmp(args[0], "irq")) {
			irq_val = num(args[1]);
			irq_pending = true;
		} else if (!strcmp(args[0], "open")) {
			file.private_data = (void *)(unsigned long)ktime_get_mono_fast_ns();
		} else if (!strcmp(args[0], "read")) {
			size_t size = num(args[1]), off;
			loff_t pos = 0;
			ssize_t ret;

			if (size > sizeof(ubuf))
				fail("read: at most %zu bytes", sizeof(ubuf));
			fault = args[3] && !strcmp(args[3], "fault");
			ret = records_read(&file, ubuf, size, &pos);
			fault = false;
			if (ret != num(args[2]))
				fail("read %zu returned %zd, want %s", size, ret, args[2]);
			for (off = 0; ret > 0 && off < (size_t)ret;) {
				struct klasy_record *r = (struct klasy_record *)(ubuf + off);

				if (r->time_ns < last_time)
					fail("record %" PRIu64 " stamped %" PRIu64 " read after one stamped %" PRIu64,
					     (u64)r->vals[0], (u64)r->time_ns, last_time);
				last_time = r->time_ns;
				got[ngot++] = r->vals[0];
				off += sizeof(*r) + r->nvals * sizeof(u64);
			}
		} else if (!strcmp(args[0], "got")) {
			if (ngot != nargs - 1)
				fail("%d records read, want %d", ngot, nargs - 1);
			for (i = 0; i < ngot; i++) {
				if (got[i] != (u64)num(args[i + 1]))
					fail("record %d holds %" PRIu64 ", want %s", i, got[i], args[i + 1]);
			}
			ngot = 0;
		} else if (!strcmp(args[0], "lost")) {
			for (i = 1; i < nargs && i <= KLASY_USER_CPUS; i++) {
				if ((long long)klasy_bufs[i - 1].lost != num(args[i]))
					fail("CPU %d lost %lu, want %s", i - 1, klasy_bufs[i - 1].lost, args[i]);
			}
		} else if (!strcmp(args[0], "unread")) {
			u64 unread = 0;

			for (i = 0; i < KLASY_USER_CPUS; i++)
				unread += klasy_bufs[i].written - klasy_bufs[i].read;
			if (unread != (u64)num(args[1]))
				fail("%" PRIu64 " records unread, want %s", unread, args[1]);
		} else if (!strcmp(args[0], "missed")) {
			if (missed != num(args[1]))
				fail("kprobes missed %u hits, want %s", missed, args[1]);
		} else if (!strcmp(args[0], "replace")) {
			int ret = replace(args[1] ? args[1] : "-");

			if (ret != num(args[2]))
				fail("replace %s: %d, want %s", args[1], ret, args[2]);
		} else {
			fail("unknown operation %s", args[0]);
		}
	}
	printf("ok %d lines\n", line_no);
	return 0;
}
