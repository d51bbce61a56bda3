// SPDX-License-Identifier: GPL-2.0
/*
 * Input for cmd/klasy's tests of klasy accesses, compiled at test time
 * with the klasy plugin: member accesses through a parameter, a macro, a
 * condition split over two lines, writes and a call. The plugin's own
 * tests (gcc-patches/plugintest) check every kind of access; these check
 * what the command prints.
 */
#include "accesses.h"

int pointer(struct task *p)
{
	int x = p->thread->fs;

	x += p->emb.fs;
	return x + p->emb.z;
}

int macro_hidden(struct task *p)
{
	return task_fs(p);
}

int multi_line(struct task *p, int a)
{
	if (a > 3 &&
	    p->emb.fs > 2)
		return 1;
	return 0;
}

void writes(struct task *p, int n)
{
	p->emb.fs = n;
	p->count += n;
}

int call_based(void)
{
	return current_task->count;
}
