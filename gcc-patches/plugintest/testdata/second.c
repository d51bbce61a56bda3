// SPDX-License-Identifier: GPL-2.0
/* A second unit: its copy of task_count() must merge with accesses.c's. */
#include "accesses.h"

int second(struct task *p)
{
	return task_count(p) + p->flag_b;	/* want: task.flag_b read param:p */
}
