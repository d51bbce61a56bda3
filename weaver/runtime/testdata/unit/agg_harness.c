// SPDX-License-Identifier: GPL-2.0
/*
 * agg_harness - klasy_agg.c's timers (TIMER_START and TIMER_STOP), taken
 * out of the source by unit_test.go into agg_types.c and agg_funcs.c and
 * run on kern_user.h's stand-ins, one timer:
 *
 *   agg_harness < SCRIPT
 *
 * Script lines (# starts a comment):
 *
 *   task N             run as task N (1..8) from now on
 *   sp ADDR            the probed context's stack pointer, which the
 *                      hook's handler puts in the hit (klasy_hit.sp); the
 *                      task's stack is [0x10000, 0x14000), any other an
 *                      IRQ stack
 *   kstack N           the kernel entry's random stack offset (0 at
 *                      first): its frames are N bytes lower, as many.
 *                      The unwinder's stand-in counts a frame per 8 bytes
 *                      from the stack's top down to sp, less N
 *   start              TIMER_START
 *   crowd N            N other tasks, each new, TIMER_START once
 *   stop               TIMER_STOP
 *   wait NS            NS ns go by (wall and the task's CPU time)
 *   timer KEY=VAL...   check the timer's counts (count wall_sum
 *                      wall_min wall_max no_start dropped nested
 *                      orphaned)
 *
 * A failed check prints "line N: ..." and exits 1.
 */
#include <inttypes.h>
#include <stdarg.h>

#include "kern_user.h"
#include "script.h"

#include "agg_types.c"

/* What klasy_agg.c's timers see of the rest of the file. */
struct klasy_agg;
struct klasy_aspect {
	struct klasy_agg *agg;
};

static struct klasy_timer timers[KLASY_USER_CPUS];

static struct klasy_map *klasy_map_of(struct klasy_aspect *a, struct klasy_map_desc *d)
{
	return d->map;
}

static void *klasy_here(struct klasy_agg *g, const struct klasy_map *m)
{
	return &timers[klasy_user_cpu];
}

/* The hit of the handler running (klasy_rt.h: one per CPU). */
static struct klasy_hit klasy_hit;

/* klasy_agg.c's klasy_frames, the kernel's unwinder: see kstack. */
static u64 kstack;

static unsigned int klasy_frames(struct pt_regs *regs)
{
	return (0x10000 + THREAD_SIZE - kstack - klasy_hit.sp) / 8;
}

/* Keyed timers (TIMER_START_BY) are the lab's to test: never here. */
static void klasy_timer_stop_by(struct klasy_aspect *a, struct klasy_map *m,
				const struct klasy_key *k, u64 wall, u64 cpu)
{
	abort();
}

#include "agg_funcs.c"

int klasy_user_cpu;
struct task_struct *klasy_user_current;
static u64 clock_ns = 1000000;

u64 ktime_get_mono_fast_ns(void)
{
	return clock_ns;
}

u64 sched_clock_cpu(int cpu)
{
	return clock_ns;
}

static u64 count(const struct klasy_timer *t, const char *key)
{
	static const struct {
		const char *key;
		size_t off;
	} keys[] = {
		{ "count", offsetof(struct klasy_timer, count) },
		{ "wall_sum", offsetof(struct klasy_timer, wall_sum) },
		{ "wall_min", offsetof(struct klasy_timer, wall_min) },
		{ "wall_max", offsetof(struct klasy_timer, wall_max) },
		{ "no_start", offsetof(struct klasy_timer, no_start) },
		{ "dropped", offsetof(struct klasy_timer, dropped) },
		{ "nested", offsetof(struct klasy_timer, nested) },
		{ "orphaned", offsetof(struct klasy_timer, orphaned) },
	};
	size_t i;

	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		if (!strcmp(keys[i].key, key))
			return *(const u64 *)((const char *)t + keys[i].off);
	}
	fail("timer: no count %s", key);
	return 0;
}

int main(void)
{
	static struct klasy_tslot slots[KLASY_AGG_TASKS];
	static struct task_struct tasks[9], others[4 * KLASY_AGG_TASKS];
	size_t nothers = 0;
	struct klasy_map map = { .tasks = slots };
	struct klasy_map_desc desc = { .name = "t", .map = &map };
	struct klasy_aspect aspect = { 0 };
	char line[1024], *args[SCRIPT_ARGS];
	int nargs, i;

	for (i = 0; i < 9; i++) {
		tasks[i].pid = i;
		tasks[i].start_time = 100 + i;
		tasks[i].stack = (void *)0x10000;	/* not to be touched */
	}
	klasy_user_current = &tasks[1];
	klasy_hit.sp = 0x10000 + THREAD_SIZE - 1024;
	while (fgets(line, sizeof(line), stdin)) {
		line_no++;
		nargs = script_args(line, args);
		if (!nargs)
			continue;
		if (!strcmp(args[0], "task")) {
			u64 n = script_num(args[1]);

			if (n < 1 || n > 8)
				fail("task: 1..8");
			klasy_user_current = &tasks[n];
		} else if (!strcmp(args[0], "sp")) {
			klasy_hit.sp = script_num(args[1]);
		} else if (!strcmp(args[0], "kstack")) {
			kstack = script_num(args[1]);
		} else if (!strcmp(args[0], "start")) {
			klasy_timer_start(&aspect, &desc);
		} else if (!strcmp(args[0], "crowd")) {
			struct task_struct *me = klasy_user_current;
			u64 n = script_num(args[1]);

			if (n > sizeof(others) / sizeof(others[0]) - nothers)
				fail("crowd: at most %zu tasks in all", sizeof(others) / sizeof(others[0]));
			for (; n; n--, nothers++) {
				others[nothers].pid = 100 + nothers;
				others[nothers].start_time = 1000 + nothers;
				others[nothers].stack = (void *)0x10000;
				klasy_user_current = &others[nothers];
				klasy_timer_start(&aspect, &desc);
			}
			klasy_user_current = me;
		} else if (!strcmp(args[0], "stop")) {
			klasy_timer_stop(&aspect, &desc);
		} else if (!strcmp(args[0], "wait")) {
			clock_ns += script_num(args[1]);
			klasy_user_current->se.sum_exec_runtime += script_num(args[1]);
		} else if (!strcmp(args[0], "timer")) {
			struct klasy_timer sum = { 0 };
			int cpu;

			for_each_possible_cpu(cpu) {
				sum.count += timers[cpu].count;
				sum.wall_sum += timers[cpu].wall_sum;
				if (timers[cpu].count && (!sum.wall_min || timers[cpu].wall_min < sum.wall_min))
					sum.wall_min = timers[cpu].wall_min;
				sum.wall_max = max(sum.wall_max, timers[cpu].wall_max);
				sum.no_start += timers[cpu].no_start;
				sum.dropped += timers[cpu].dropped;
				sum.nested += timers[cpu].nested;
				sum.orphaned += timers[cpu].orphaned;
			}
			for (i = 1; i < nargs; i++) {
				char *eq = strchr(args[i], '=');
				u64 got;

				if (!eq)
					fail("timer: %s is not KEY=VAL", args[i]);
				*eq = '\0';
				got = count(&sum, args[i]);
				if (got != script_num(eq + 1))
					fail("%s=%" PRIu64 ", want %s", args[i], got, eq + 1);
			}
		} else {
			fail("unknown operation %s", args[0]);
		}
	}
	printf("ok %d lines\n", line_no);
	return 0;
}
