// SPDX-License-Identifier: GPL-2.0
/*
 * klasy_stat - a module for the module-address lab tests, built with the
 * klasy plugin against the built lab kernel's tree. Its counter is a
 * static struct, and stat_bump is only ever called with its address: GCC
 * propagates the constant, so the accesses in stat_bump are to a fixed
 * address of the module's data (target() is the static's address, which
 * klasy relocates). Writing N to /sys/module/klasy_stat/parameters/bump
 * adds N to the value; reading it gives "value bumps sets".
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/moduleparam.h>

#include "klasy_stat.h"

static struct klasy_stat stat_counter = { .value = 100 };
/* Sets written: another static in .data, which GCC puts before the counter. */
static unsigned long stat_sets = 1;

static noinline void stat_bump(struct klasy_stat *s, long by)
{
	s->value += by;
	s->bumps++;
}

static int bump_set(const char *val, const struct kernel_param *kp)
{
	long by;
	int err = kstrtol(val, 0, &by);

	if (err)
		return err;
	stat_bump(&stat_counter, by);
	stat_sets++;
	return 0;
}

static int bump_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%ld %lu %lu\n", stat_counter.value,
			  stat_counter.bumps, stat_sets);
}

static const struct kernel_param_ops bump_ops = {
	.set = bump_set,
	.get = bump_get,
};
module_param_cb(bump, &bump_ops, NULL, 0644);
MODULE_PARM_DESC(bump, "write N to add N to the counter; read: value bumps sets");

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("klasy module-address test module");
