// SPDX-License-Identifier: GPL-2.0
/*
 * klasy_counter - a small module for the access e2e test, built with the
 * klasy plugin against the built lab kernel's tree. Writing N to
 * /sys/module/klasy_counter/parameters/bump adds N to the counter's
 * value and counts the bump; the test weaves access(klasy_counter.value)
 * AND target(c) into it and checks the values its advice records.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/slab.h>

#include "klasy_counter.h"

static struct klasy_counter *counter;

static noinline void counter_bump(struct klasy_counter *c, long by)
{
	c->value += by;
	c->bumps++;
}

static int bump_set(const char *val, const struct kernel_param *kp)
{
	long by;
	int err = kstrtol(val, 0, &by);

	if (err)
		return err;
	counter_bump(counter, by);
	return 0;
}

static int bump_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%ld %lu\n", counter->value, counter->bumps);
}

static const struct kernel_param_ops bump_ops = {
	.set = bump_set,
	.get = bump_get,
};
module_param_cb(bump, &bump_ops, NULL, 0644);
MODULE_PARM_DESC(bump, "write N to add N to the counter; read: value bumps");

static int __init klasy_counter_init(void)
{
	counter = kzalloc(sizeof(*counter), GFP_KERNEL);
	return counter ? 0 : -ENOMEM;
}

static void __exit klasy_counter_exit(void)
{
	kfree(counter);
}

module_init(klasy_counter_init);
module_exit(klasy_counter_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("klasy access e2e test module");
