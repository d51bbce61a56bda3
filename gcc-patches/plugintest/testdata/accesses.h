/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Types, macros and a header inline function for accesses.c and second.c.
 * A trailing want comment lists the records the plugin must write for
 * its line: STRUCT.MEMBER MODE BASE_KIND:BASE_EXPR, separated by ";".
 */
#ifndef ACCESSES_H
#define ACCESSES_H

struct inner {
	int fs;
	int z;
};

struct task {
	struct inner *thread;
	struct inner *threads[4];
	struct inner emb;
	int arr[4];
	unsigned int flag_a : 3;
	unsigned int flag_b : 5;
	union {			/* anonymous member: task.count, not <anon>.count */
		int count;
		long wide;
	};
	struct {
		int ax;
	};
	struct task *next;
};

typedef struct {		/* anonymous type: named by its typedef */
	int a;
	int b;
} anon_t;

union value {
	int i;
	float f;
};

struct holder {
	int before;
	struct task t;
};

#define READ_ONCE(x) (*(const volatile __typeof__(x) *)&(x))
#define WRITE_ONCE(x, v) (*(volatile __typeof__(x) *)&(x) = (v))
#define container_of(ptr, type, member) ({				\
	void *__mptr = (void *)(ptr);					\
	((type *)(__mptr - __builtin_offsetof(type, member))); })

/* A member access hidden in a macro, like get_fs() in the dissertation. */
#define task_fs(p) ((p)->thread->fs)

struct task *get_task(void);
#define current_task get_task()
void *end_pointer(const struct task *t);
#define shinfo(t) ((struct holder *)end_pointer(t))

static inline int task_count(const struct task *t)
{
	return t->count;	/* want: task.count read param:t */
}

/* Never called: the call graph drops it, so no record. */
static inline int task_unused(const struct task *t)
{
	return t->flag_a;
}

#endif
