// SPDX-License-Identifier: GPL-2.0
//go:build ignore

/*
 * Per-call variables (klasy_rt.h: CALL_SET, CALL_GET).
 *
 * Each task that has a call open keeps a slot in the aspect's table.
 * klasy_enter serialises handlers per CPU only: the slot's task runs
 * on one CPU at a time, but another task may reclaim a stale slot from
 * another CPU at the same moment. So every reader and writer of a slot
 * holds its busy bit (cmpxchg on the slot's task word), and one that
 * finds it taken gives up, counted as missed, rather than wait in a
 * handler.
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

/*
 * A slot's task word: its task_struct (8-byte aligned), the busy bit of
 * the handler that holds the slot, and a count of the task's unlocks
 * that makes a reclaimer's compare-and-exchange fail once the task has
 * used the slot since the reclaimer looked. So a reclaimer takes the
 * busy bit only to take the slot over, never to look and back out: the
 * slot's own task misses (finds it busy) only while its slot is being
 * taken from it, after which it has no frames a later access could read
 * stale. The count survives the slot's freeing (task 0) and claiming:
 * reset there, a task that freed its slot and claimed it again, one call
 * returned and the next begun in the reclaimer's window (an interrupt
 * in an ftrace-ops handler), would show the word the reclaimer saw and
 * lose the new call's frame. (The count wraps at 4: a task would have
 * to unlock its slot 4 times between a reclaimer's look and its
 * exchange, and then lose its frames, not read another's.)
 */
#define KLASY_CALL_BUSY 1UL
#define KLASY_CALL_GEN 6UL
#define KLASY_CALL_TASK (~7UL)

/* Gives s up, the next unlock counted. */
static void klasy_call_unlock(struct klasy_call_task *s)
{
	unsigned long w = s->task;

	/* The slot's writes before the next holder's cmpxchg sees it. */
	smp_store_release(&s->task, (w & KLASY_CALL_TASK) |
			  ((w + 2) & KLASY_CALL_GEN));
}

/* The newest open call of slot s, 0 when none; racy without its lock. */
static u64 klasy_call_newest(struct klasy_call_task *s)
{
	unsigned int i, n = min_t(unsigned int, READ_ONCE(s->n), KLASY_CALL_DEPTH);
	u64 t = 0;

	for (i = 0; i < n; i++)
		t = max(t, READ_ONCE(s->f[i].t0));
	return t;
}

/*
 * Slot s, held, becomes the current task's: the frames another task
 * left in it are thrown away, counted in c->dropped. (A free slot has
 * none: the table starts zeroed and klasy_call_end frees a slot only
 * when its last frame closes.)
 */
static void klasy_call_own(struct klasy_calls *c, struct klasy_call_task *s)
{
	if (s->n)
		atomic_long_add(min_t(unsigned int, s->n, KLASY_CALL_DEPTH),
				&c->dropped);
	s->birth = current->start_time;
	s->n = 0;
}

/*
 * The current task's slot, held (busy), or NULL: counted in c->missed
 * when it was being taken over. With claim, a free slot becomes its
 * own, else the one of a task whose newest call is older than
 * KLASY_CALL_STALE_NS (it exited, its returns all missed, or it is
 * blocked in a call: that call reads 0 on its return); none: counted
 * in c->full. Frames thrown away before their return (a slot taken
 * over, a reused task_struct's) are counted in c->dropped.
 */
static struct klasy_call_task *klasy_call_task(struct klasy_calls *c,
					       bool claim)
{
	unsigned long me = (unsigned long)current, w;
	unsigned int i = hash_long(me, KLASY_AGG_TASK_BITS), p, pass;
	struct klasy_call_task *s;
	u64 now;

	for (p = 0; p < KLASY_CALL_PROBES; p++) {
		s = &c->t[(i + p) & (KLASY_AGG_TASKS - 1)];
		/* Pairs with klasy_call_unlock: the last holder's writes. */
		w = smp_load_acquire(&s->task);
		if ((w & KLASY_CALL_TASK) != me)
			continue;
		if ((w & KLASY_CALL_BUSY) ||
		    cmpxchg(&s->task, w, w | KLASY_CALL_BUSY) != w) {
			atomic_long_inc(&c->missed);
			return NULL;
		}
		/* A task_struct an exited task left: not our calls. */
		if (s->birth != current->start_time)
			klasy_call_own(c, s);
		return s;
	}
	if (!claim)
		return NULL;
	now = ktime_get_mono_fast_ns();
	/* A free slot first; another task's stale one only if none is. */
	for (pass = 0; pass < 2; pass++) {
		for (p = 0; p < KLASY_CALL_PROBES; p++) {
			s = &c->t[(i + p) & (KLASY_AGG_TASKS - 1)];
			/* Its task's frames as of its last unlock, for the look. */
			w = smp_load_acquire(&s->task);
			if ((w & KLASY_CALL_BUSY) ||
			    ((w & KLASY_CALL_TASK) &&
			     (!pass || (s64)(now - klasy_call_newest(s)) <=
				       KLASY_CALL_STALE_NS)))
				continue;
			/* Fails if its task used it since w was read. */
			if (cmpxchg(&s->task, w, me | (w & KLASY_CALL_GEN) |
				    KLASY_CALL_BUSY) != w)
				continue;
			klasy_call_own(c, s);
			return s;
		}
	}
	atomic_long_inc(&c->full);
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
	if (WARN_ON_ONCE(i >= s->n))
		return;
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
	if (s->n == KLASY_CALL_DEPTH) {
		klasy_call_drop(s, 0);
		atomic_long_inc(&c->dropped);
	}
	s->f[s->n] = (struct klasy_call_frame){
		.cfa = cfa,
		.t0 = ktime_get_mono_fast_ns(),
	};
	WRITE_ONCE(s->n, s->n + 1);
	klasy_call_unlock(s);
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
	if (!s->n)
		/* Free, given up, counted: writes before a new holder's. */
		smp_store_release(&s->task, (s->task + 2) & KLASY_CALL_GEN);
	else
		klasy_call_unlock(s);
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
	if (!s)
		return;
	f = klasy_call_frame(s, cfa);
	if (f) {
		f->v[var] = v;
		f->set |= 1U << var;
	}
	klasy_call_unlock(s);
}
EXPORT_SYMBOL_GPL(klasy_call_set);

u64 klasy_call_get(struct klasy_calls *c, unsigned int var)
{
	unsigned long cfa = this_cpu_read(klasy_hit.cfa);
	struct klasy_call_task *s;
	struct klasy_call_frame *f;
	u64 v = 0;

	if (!cfa || var >= KLASY_CALL_VARS)
		return 0;
	s = klasy_call_task(c, false);
	if (!s)
		return 0;
	f = klasy_call_frame(s, cfa);
	if (f && (f->set & (1U << var)))
		v = f->v[var];
	klasy_call_unlock(s);
	return v;
}
EXPORT_SYMBOL_GPL(klasy_call_get);
