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

/*
 * c is last used by the line's last instruction, which puts the sum in
 * c's register for the call: at the line's end DWARF has only c's entry
 * value, so after advice with target(c) hooks that last instruction.
 * noipa: GCC would otherwise pass the two members instead of c.
 */
static __attribute__((__noipa__)) long counter_mix(long v, long k)
{
	return v * 10 + k;
}

static __attribute__((__noipa__)) long counter_span(struct klasy_counter *c, long k)
{
	long v = c->span.lo + c->span.hi;

	return counter_mix(v, k);
}

static int span_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%ld\n", counter_span(counter, 7));
}

static const struct kernel_param_ops span_ops = {
	.get = span_get,
};
module_param_cb(span, &span_ops, NULL, 0444);
MODULE_PARM_DESC(span, "read: (span.lo + span.hi) * 10 + 7");

static const struct kernel_param_ops bump_ops = {
	.set = bump_set,
	.get = bump_get,
};
module_param_cb(bump, &bump_ops, NULL, 0644);
MODULE_PARM_DESC(bump, "write N to add N to the counter; read: value bumps");

static int __init klasy_counter_init(void)
{
	counter = kzalloc(sizeof(*counter), GFP_KERNEL);
	if (!counter)
		return -ENOMEM;
	counter->span.lo = 40;
	counter->span.hi = 2;
	return 0;
}

static void __exit klasy_counter_exit(void)
{
	kfree(counter);
}

module_init(klasy_counter_init);
module_exit(klasy_counter_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("klasy access e2e test module");
