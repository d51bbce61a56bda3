// SPDX-License-Identifier: GPL-2.0
//go:build ignore

/*
 * klasy_call.c - per-call variables (klasy_rt.h: CALL_SET, CALL_GET).
 *
 * Each task that has a call open keeps a slot in the aspect's table,
 * claimed with a compare-and-exchange; from then on only that task
 * writes it, and it runs on one CPU at a time, with at most one klasy
 * handler per CPU (klasy_enter), so the frames need no lock.
 */
#include <linux/hash.h>
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/sched.h>
#include <linux/sched/task_stack.h>
#include <linux/timekeeping.h>

#include "klasy_internal.h"

/* Slots a task may take, from its hash on (as a timer's). */
#define KLASY_CALL_PROBES 4

/* A slot whose newest call is older than this may be taken. */
#define KLASY_CALL_STALE_NS (60 * NSEC_PER_SEC)

/* The newest open call of slot s, 0 when none. */
static u64 klasy_call_newest(struct klasy_call_task *s)
{
	u64 t = 0;
	unsigned int i;

	for (i = 0; i < READ_ONCE(s->n) && i < KLASY_CALL_DEPTH; i++)
		t = max(t, READ_ONCE(s->f[i].t0));
	return t;
}

/*
 * The current task's slot, or NULL. With claim, a free slot becomes its
 * own, or the one of a task whose newest call is older than
 * KLASY_CALL_STALE_NS (it exited, or its returns all missed).
 */
static struct klasy_call_task *klasy_call_task(struct klasy_calls *c,
					       bool claim)
{
	unsigned long me = (unsigned long)current, old;
	unsigned int i = hash_long(me, KLASY_AGG_TASK_BITS), p;
	struct klasy_call_task *s;
	u64 now;

	for (p = 0; p < KLASY_CALL_PROBES; p++) {
		s = &c->t[(i + p) & (KLASY_AGG_TASKS - 1)];
		if (READ_ONCE(s->task) == me) {
			/* A task_struct an exited task left: not our calls. */
			if (s->birth != current->start_time) {
				s->birth = current->start_time;
				s->n = 0;
			}
			return s;
		}
	}
	if (!claim)
		return NULL;
	now = ktime_get_mono_fast_ns();
	for (p = 0; p < KLASY_CALL_PROBES; p++) {
		s = &c->t[(i + p) & (KLASY_AGG_TASKS - 1)];
		old = READ_ONCE(s->task);
		if (old && (s64)(now - klasy_call_newest(s)) <= KLASY_CALL_STALE_NS)
			continue;
		if (cmpxchg(&s->task, old, me) != old)
			continue;
		s->birth = current->start_time;
		s->n = 0;
		return s;
	}
	return NULL;
}

/* The open frame of call cfa in s, or NULL. */
static struct klasy_call_frame *klasy_call_frame(struct klasy_call_task *s,
						 unsigned long cfa)
{
	unsigned int i;

	for (i = 0; i < s->n; i++)
		if (s->f[i].cfa == cfa)
			return &s->f[i];
	return NULL;
}

/* Drops s's frame i, keeping the others in order. */
static void klasy_call_drop(struct klasy_call_task *s, unsigned int i)
{
	memmove(&s->f[i], &s->f[i + 1], (s->n - i - 1) * sizeof(s->f[0]));
	s->n--;
}

/*
 * Opens the frame of the call whose CFA is cfa, at its entry; returns
 * the cfa for hit->cfa, 0 when the call keeps no variables. Frames
 * compare only on the task's own stack: an interrupt's stack is not
 * ordered with it (object_is_on_stack is arithmetic: safe in NMI too).
 */
unsigned long klasy_call_begin(struct klasy_calls *c, unsigned long cfa)
{
	struct klasy_call_task *s;
	unsigned int i;

	if (!object_is_on_stack((void *)cfa))
		return 0;
	s = klasy_call_task(c, true);
	if (!s)
		return 0;
	/*
	 * The stack grows down: a frame at cfa or below belongs to a call
	 * that has returned (its return hook missed, or it had none).
	 */
	for (i = s->n; i-- > 0;)
		if (s->f[i].cfa <= cfa)
			klasy_call_drop(s, i);
	if (s->n == KLASY_CALL_DEPTH)
		klasy_call_drop(s, 0);
	s->f[s->n] = (struct klasy_call_frame){
		.cfa = cfa,
		.t0 = ktime_get_mono_fast_ns(),
	};
	s->n++;
	return cfa;
}
EXPORT_SYMBOL_GPL(klasy_call_begin);

/* Closes the call whose CFA is cfa, on its return, after its advice. */
void klasy_call_end(struct klasy_calls *c, unsigned long cfa)
{
	struct klasy_call_task *s;
	unsigned int i;

	if (!object_is_on_stack((void *)cfa))
		return;
	s = klasy_call_task(c, false);
	if (!s)
		return;
	for (i = s->n; i-- > 0;)
		if (s->f[i].cfa <= cfa)
			klasy_call_drop(s, i);
	/* The frames' last writes before another task may claim the slot. */
	if (!s->n)
		smp_store_release(&s->task, 0);
}
EXPORT_SYMBOL_GPL(klasy_call_end);

void klasy_call_set(struct klasy_calls *c, unsigned int var, u64 v)
{
	unsigned long cfa = this_cpu_read(klasy_hit.cfa);
	struct klasy_call_task *s;
	struct klasy_call_frame *f;

	if (!cfa || var >= KLASY_CALL_VARS)
		return;
	s = klasy_call_task(c, false);
	f = s ? klasy_call_frame(s, cfa) : NULL;
	if (!f)
		return;
	f->v[var] = v;
	f->set |= 1U << var;
}
EXPORT_SYMBOL_GPL(klasy_call_set);

u64 klasy_call_get(struct klasy_calls *c, unsigned int var)
{
	unsigned long cfa = this_cpu_read(klasy_hit.cfa);
	struct klasy_call_task *s;
	struct klasy_call_frame *f;

	if (!cfa || var >= KLASY_CALL_VARS)
		return 0;
	s = klasy_call_task(c, false);
	f = s ? klasy_call_frame(s, cfa) : NULL;
	if (!f || !(f->set & (1U << var)))
		return 0;
	return f->v[var];
}
EXPORT_SYMBOL_GPL(klasy_call_get);
