/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kern_user.h - the kernel primitives that the functions unit_test.go
 * takes out of klasy_core.c and klasy_agg.c use, in user space, one
 * thread, for core_harness.c and agg_harness.c:
 *
 *   CPUs              klasy_user_cpu, set by the harness
 *   interrupts        no local_irq_save/restore: the functions under
 *                     test run in kprobe handlers and need not turn
 *                     interrupts off (core_harness.c raises interrupts
 *                     whose hooks kprobes counts missed)
 *   clocks            ktime_get_mono_fast_ns advances 1 per read
 *   current           a task_struct of a few fields, the harness's
 *   per-CPU variables this_cpu_ptr is the variable: the harness keeps
 *                     the one of the CPU it runs on
 */
#ifndef _KERN_USER_H
#define _KERN_USER_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
typedef int64_t s64;
typedef int32_t s32;
typedef u8 __u8;
typedef u16 __u16;
typedef u32 __u32;
typedef u64 __u64;
typedef s32 __s32;

#define __user
#define __percpu
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define READ_ONCE(x) (x)
#define WRITE_ONCE(x, v) ((x) = (v))
#define smp_store_release(p, v) (*(p) = (v))
#define smp_load_acquire(p) (*(p))
#define cmpxchg(p, o, n) __sync_val_compare_and_swap((p), (o), (n))
#define min(a, b) ((a) < (b) ? (a) : (b))
#define max(a, b) ((a) > (b) ? (a) : (b))
#define min_t(t, a, b) ((t)(a) < (t)(b) ? (t)(a) : (t)(b))
#define U8_MAX 255
#define S64_MAX INT64_MAX
#define EXPORT_SYMBOL_GPL(sym)
#define noinline __attribute__((noinline))
#undef __always_inline
#define __always_inline inline __attribute__((always_inline))
#define struct_size(p, member, n) (sizeof(*(p)) + (size_t)(n) * sizeof((p)->member[0]))
#define WARN_ONCE(cond, fmt, ...) ({ bool __c = (cond); if (__c) fprintf(stderr, fmt, ##__VA_ARGS__); __c; })
#define pr_err(fmt, ...) fprintf(stderr, fmt, ##__VA_ARGS__)
#define THREAD_SIZE 16384UL
#define NSEC_PER_SEC 1000000000LL
#define ERESTARTSYS 512

static inline int fls64(u64 x)
{
	return x ? 64 - __builtin_clzll(x) : 0;
}

/* include/linux/hash.h, on 64 bits. */
#define GOLDEN_RATIO_64 0x61C8864680B583EBull
static inline u32 hash_long(unsigned long v, unsigned int bits)
{
	return (u32)((u64)v * GOLDEN_RATIO_64 >> (64 - bits));
}

/* CPUs. */
#define KLASY_USER_CPUS 4
extern int klasy_user_cpu;
#define nr_cpu_ids KLASY_USER_CPUS
#define raw_smp_processor_id() klasy_user_cpu
#define for_each_possible_cpu(cpu) for ((cpu) = 0; (cpu) < KLASY_USER_CPUS; (cpu)++)
/* A per-CPU counter: an array of KLASY_USER_CPUS. */
#define this_cpu_inc(x) ((&(x))[klasy_user_cpu]++)
#define this_cpu_ptr(p) (p)

/* Clocks. */
u64 ktime_get_mono_fast_ns(void);
u64 sched_clock_cpu(int cpu);

/* The current task, and the stack pointer of the code running. */
struct sched_entity {
	u64 exec_start, sum_exec_runtime;
};
struct pt_regs;
struct task_struct {
	u64 start_time;
	struct sched_entity se;
	char comm[16];
	int pid;
	void *stack;	/* THREAD_SIZE bytes */
};
extern struct task_struct *klasy_user_current;
#define current klasy_user_current
#define task_pid_nr(t) ((t)->pid)
static inline bool object_is_on_stack(const void *obj)
{
	const char *stack = current->stack;

	return (const char *)obj >= stack && (const char *)obj < stack + THREAD_SIZE;
}

/* The reader's side of a file. */
struct file {
	void *private_data;
};
struct mutex {
	int locked;
};
#define mutex_lock_interruptible(m) ((m)->locked++, 0)
#define mutex_unlock(m) ((m)->locked--)
/* Copies unless the harness makes the user's buffer fault. */
unsigned long copy_to_user(void __user *to, const void *from, unsigned long n);

/* list_head and RCU, one thread. */
struct list_head {
	struct list_head *next, *prev;
};
#define rcu_read_lock() do { } while (0)
#define rcu_read_unlock() do { } while (0)
#define container_of(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))
#define list_entry(ptr, type, member) container_of(ptr, type, member)
#define list_for_each_entry_rcu(pos, head, member) \
	for (pos = list_entry((head)->next, __typeof__(*pos), member); \
	     &pos->member != (head); \
	     pos = list_entry(pos->member.next, __typeof__(*pos), member))

#endif /* _KERN_USER_H */
