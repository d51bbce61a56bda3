/* SPDX-License-Identifier: GPL-2.0 */
/* Types and macros for accesses.c, cmd/klasy's input for klasy accesses. */
#ifndef ACCESSES_H
#define ACCESSES_H

struct inner {
	int fs;
	int z;
};

struct task {
	struct inner *thread;
	struct inner emb;
	int count;
};

/* An access spelled here but hooked where the macro is used. */
#define task_fs(p) ((p)->thread->fs)

struct task *get_task(void);
#define current_task get_task()

#endif
