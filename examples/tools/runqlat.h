/* SPDX-License-Identifier: GPL-2.0 */
/*
 * runqlat.klasy's state shared by its advice (bpftrace's @qtime[pid]):
 * when each task was woken or preempted, by pid. A pid's slot is
 * pid % RUNQLAT_SLOTS and holds the pid, so two pids sharing a slot
 * never take each other's time; the later one wins the slot.
 */
#define RUNQLAT_SLOTS 4096

struct runqlat_slot {
	u32 pid;
	u64 t;
};

static struct runqlat_slot runqlat_q[RUNQLAT_SLOTS];

static inline void runqlat_enqueued(u32 pid)
{
	struct runqlat_slot *s = &runqlat_q[pid % RUNQLAT_SLOTS];

	WRITE_ONCE(s->t, 0);
	WRITE_ONCE(s->pid, pid);
	WRITE_ONCE(s->t, ktime_get_ns());
}

/* runqlat_queued is how long pid waited to run, 0 if unknown. */
static inline u64 runqlat_queued(u32 pid)
{
	struct runqlat_slot *s = &runqlat_q[pid % RUNQLAT_SLOTS];
	u64 t = READ_ONCE(s->t);

	if (!t || READ_ONCE(s->pid) != pid || cmpxchg(&s->t, t, 0) != t)
		return 0;
	return ktime_get_ns() - t;
}
