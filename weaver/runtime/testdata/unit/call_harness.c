// SPDX-License-Identifier: GPL-2.0
/*
 * call_harness - klasy_call.c's per-call variables (CALL_SET, CALL_GET),
 * taken out of the source by unit_test.go into call_types.c and
 * call_funcs.c, run by threads at once, each a task on a CPU of its own:
 *
 *   call_harness TASKS ROUNDS
 *
 * Every task hashes to the same KLASY_CALL_PROBES slots and the clock
 * moves a minute and more per read, so every slot looks stale to a task
 * without one: tasks beyond the slots reclaim them from tasks that are
 * inside a call on another CPU, the race the slots' busy bit settles.
 * Each round a task opens a call and a nested one, sets a value unique
 * to the task, call and round in each, reads them back and closes them.
 * A read must give the value the task set in that call, or 0 (the call
 * lost its slot or missed it); anything else is another call's value.
 * Prints "ok READS NONZERO MISSED FULL" or the first wrong read, exit 1.
 *
 *   call_harness aba
 *
 * One thread, two tasks: A is inside a call with a value set when R,
 * looking for a slot, finds A's stale; between R's look at it and its
 * exchange, A's call returns (its slot freed) and A's next call begins
 * (the slot claimed again) and sets a value. A must read that value
 * back: R may not take the slot on what it saw before. Prints "ok" or
 * what A read, exit 1.
 *
 *   call_harness blocked | reused | free
 *
 * blocked: A is inside two nested calls with values set, blocked past
 * the minute after which R, opening a call when every other slot is
 * held too, takes A's slot over. A's returns read 0, R's its own value,
 * and A's two calls are counted as dropped. reused: A's task_struct,
 * with two calls open, is reused by a new task: the two are dropped.
 * free: A's slot is stale but another is free: R takes the free one, A
 * reads its value, nothing is dropped. Prints "ok" or what was read and
 * counted, exit 1.
 */
#include <inttypes.h>
#include <pthread.h>

#include "kern_user.h"

/* Threads: what the kernel has that kern_user.h's one thread lacks. */
#undef READ_ONCE
#undef WRITE_ONCE
#undef smp_store_release
#undef smp_load_acquire
#undef current
#define READ_ONCE(x) (*(volatile __typeof__(x) *)&(x))
/* aba: the hook runs once, just before the next compare-and-exchange. */
static int hook_armed;
static void aba_hook(void);
#undef cmpxchg
#define cmpxchg(p, o, n) ({ \
	if (hook_armed) { \
		hook_armed = 0; \
		aba_hook(); \
	} \
	__sync_val_compare_and_swap((p), (o), (n)); })
#define WRITE_ONCE(x, v) (*(volatile __typeof__(x) *)&(x) = (v))
#define smp_store_release(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define smp_load_acquire(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
static __thread struct task_struct *task;
#define current task
static inline bool thread_on_stack(const void *obj)
{
	const char *stack = current->stack;

	return (const char *)obj >= stack && (const char *)obj < stack + THREAD_SIZE;
}
#define object_is_on_stack thread_on_stack

typedef struct {
	long counter;
} atomic_long_t;
#define atomic_long_inc(v) __atomic_fetch_add(&(v)->counter, 1, __ATOMIC_RELAXED)
#define atomic_long_add(i, v) __atomic_fetch_add(&(v)->counter, (i), __ATOMIC_RELAXED)
#define atomic_long_read(v) __atomic_load_n(&(v)->counter, __ATOMIC_RELAXED)
#define WARN_ON_ONCE(c) ({ bool __c = (c); if (__c) { fprintf(stderr, "WARN_ON_ONCE(%s)\n", #c); abort(); } __c; })

/* Every task on the same slots: they compete for KLASY_CALL_PROBES. */
#undef hash_long
#define hash_long(v, bits) 0U

#include "call_types.c"

/* The hit of the handler running on this thread's CPU. */
static __thread struct klasy_hit klasy_hit;
#define this_cpu_read(x) (x)

/* Each read a minute and a second later: every other slot is stale. */
static u64 clock_ns;
u64 ktime_get_mono_fast_ns(void)
{
	return __atomic_add_fetch(&clock_ns, 61 * NSEC_PER_SEC, __ATOMIC_RELAXED);
}

#include "call_funcs.c"

static struct klasy_calls calls;
static long rounds, reads, nonzero;
static int failed;

static void check(u64 got, u64 want, const char *what)
{
	__atomic_fetch_add(&reads, 1, __ATOMIC_RELAXED);
	if (!got)
		return;
	__atomic_fetch_add(&nonzero, 1, __ATOMIC_RELAXED);
	if (got != want && !__atomic_exchange_n(&failed, 1, __ATOMIC_RELAXED))
		printf("task %d: %s read %#" PRIx64 ", want %#" PRIx64 " or 0\n",
		       current->pid, what, got, want);
}

static void *run(void *arg)
{
	struct task_struct t = { .pid = (int)(long)arg, .start_time = 1 };
	unsigned long top;
	long r;

	t.stack = calloc(1, THREAD_SIZE);
	task = &t;
	top = (unsigned long)t.stack + THREAD_SIZE;
	for (r = 0; r < rounds && !__atomic_load_n(&failed, __ATOMIC_RELAXED); r++) {
		u64 outer = (u64)t.pid << 40 | (u64)r << 1 | 1;
		u64 inner = outer + 1;

		klasy_hit.cfa = klasy_call_begin(&calls, top - 64);
		klasy_call_set(&calls, 0, outer);
		klasy_hit.cfa = klasy_call_begin(&calls, top - 512);
		klasy_call_set(&calls, 0, inner);
		check(klasy_call_get(&calls, 0), inner, "the nested call");
		klasy_call_end(&calls, top - 512);
		klasy_hit.cfa = top - 64;
		check(klasy_call_get(&calls, 0), outer, "the outer call");
		klasy_call_end(&calls, top - 64);
		klasy_hit.cfa = 0;
	}
	free(t.stack);
	return NULL;
}

static struct task_struct task_a = { .pid = 1, .start_time = 1 };
static struct task_struct task_r = { .pid = 2, .start_time = 2 };

/* A's call returns and its next begins, with a value set. */
static void aba_hook(void)
{
	unsigned long top = (unsigned long)task_a.stack + THREAD_SIZE;

	task = &task_a;
	klasy_call_end(&calls, top - 64);
	klasy_hit.cfa = klasy_call_begin(&calls, top - 64);
	klasy_call_set(&calls, 0, 0xa2);
	klasy_hit.cfa = 0;
	task = &task_r;
}

static int aba(void)
{
	unsigned long top_a, top_r;
	u64 got;

	task_a.stack = calloc(1, THREAD_SIZE);
	task_r.stack = calloc(1, THREAD_SIZE);
	top_a = (unsigned long)task_a.stack + THREAD_SIZE;
	top_r = (unsigned long)task_r.stack + THREAD_SIZE;
	task = &task_a;
	klasy_hit.cfa = klasy_call_begin(&calls, top_a - 64);
	klasy_call_set(&calls, 0, 0xa1);
	klasy_hit.cfa = 0;
	/* R has no slot: its first exchange is its take of A's. */
	task = &task_r;
	hook_armed = 1;
	klasy_call_begin(&calls, top_r - 64);
	task = &task_a;
	klasy_hit.cfa = top_a - 64;
	got = klasy_call_get(&calls, 0);
	if (hook_armed || got != 0xa2) {
		printf("A read %#" PRIx64 ", want 0xa2 (missed %ld, full %ld)\n", got,
		       atomic_long_read(&calls.missed), atomic_long_read(&calls.full));
		return 1;
	}
	printf("ok\n");
	return 0;
}

/* t opens a call at depth d (its CFA d * 64 below its stack's top). */
static void open_call(struct task_struct *t, int d, u64 v)
{
	if (!t->stack)
		t->stack = calloc(1, THREAD_SIZE);
	task = t;
	klasy_hit.cfa = klasy_call_begin(&calls,
					 (unsigned long)t->stack + THREAD_SIZE - 64 * d);
	klasy_call_set(&calls, 0, v);
	klasy_hit.cfa = 0;
}

/* What t's call at depth d reads, closing it. */
static u64 close_call(struct task_struct *t, int d)
{
	unsigned long cfa = (unsigned long)t->stack + THREAD_SIZE - 64 * d;
	u64 v;

	task = t;
	klasy_hit.cfa = cfa;
	v = klasy_call_get(&calls, 0);
	klasy_call_end(&calls, cfa);
	klasy_hit.cfa = 0;
	return v;
}

static int expect(const char *mode, u64 a_inner, u64 a_outer, u64 want_a,
		  u64 r, u64 want_r, long want_dropped)
{
	if (a_inner != want_a || a_outer != want_a || r != want_r ||
	    atomic_long_read(&calls.dropped) != want_dropped ||
	    atomic_long_read(&calls.missed) || atomic_long_read(&calls.full)) {
		printf("%s: A read %#" PRIx64 " %#" PRIx64 " (want %#" PRIx64 "), R %#" PRIx64
		       " (want %#" PRIx64 "); dropped %ld (want %ld), missed %ld, full %ld\n",
		       mode, a_inner, a_outer, want_a, r, want_r,
		       atomic_long_read(&calls.dropped), want_dropped,
		       atomic_long_read(&calls.missed), atomic_long_read(&calls.full));
		return 1;
	}
	printf("ok\n");
	return 0;
}

static int slots_taken(const char *mode)
{
	static struct task_struct others[KLASY_CALL_PROBES];
	struct task_struct b = { .pid = 3, .start_time = 3 };
	u64 inner, outer, r;
	int i;

	open_call(&task_a, 1, 0xa1);
	open_call(&task_a, 2, 0xa2);
	if (!strcmp(mode, "blocked"))
		for (i = 1; i < KLASY_CALL_PROBES; i++) {
			others[i] = (struct task_struct){ .pid = 10 + i, .start_time = 10 + i };
			open_call(&others[i], 1, 0xc0 + i);
		}
	if (!strcmp(mode, "reused")) {
		/* A exits inside both calls; b gets its task_struct. */
		b.stack = task_a.stack;
		task_a.start_time = b.start_time;
		open_call(&task_a, 1, 0xb1);
		r = close_call(&task_a, 1);
		return expect(mode, 0, 0, 0, r, 0xb1, 2);
	}
	/* R's call, a minute later by the clock. */
	open_call(&task_r, 1, 0xd1);
	r = close_call(&task_r, 1);
	inner = close_call(&task_a, 2);
	outer = close_call(&task_a, 1);
	if (!strcmp(mode, "blocked"))
		return expect(mode, inner, outer, 0, r, 0xd1, 2);
	if (inner != 0xa2)
		return expect(mode, inner, 0, 0xa2, r, 0xd1, 0);
	return expect(mode, outer, outer, 0xa1, r, 0xd1, 0);
}

int main(int argc, char **argv)
{
	long i, n;
	pthread_t *th;

	if (argc == 2 && !strcmp(argv[1], "aba"))
		return aba();
	if (argc == 2 && (!strcmp(argv[1], "blocked") ||
			  !strcmp(argv[1], "reused") || !strcmp(argv[1], "free")))
		return slots_taken(argv[1]);
	if (argc != 3)
		return 2;
	n = atol(argv[1]);
	rounds = atol(argv[2]);
	th = calloc(n, sizeof(*th));
	for (i = 0; i < n; i++)
		pthread_create(&th[i], NULL, run, (void *)(i + 1));
	for (i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	if (failed)
		return 1;
	printf("ok %ld %ld %ld %ld\n", reads, nonzero,
	       atomic_long_read(&calls.missed), atomic_long_read(&calls.full));
	return 0;
}
