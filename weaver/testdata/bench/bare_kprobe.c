// SPDX-License-Identifier: GPL-2.0
/*
 * bare_kprobe - the baseline of klasy's hook benchmark: one kprobe with
 * an empty handler at sym+off, the least any kprobe-based tool can cost
 * at that site.
 *
 *   insmod bare_kprobe.ko sym=__x64_sys_getppid off=0
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/kernel.h>
#include <linux/kprobes.h>
#include <linux/module.h>

static char *sym = "__x64_sys_getppid";
module_param(sym, charp, 0444);
static unsigned long off;
module_param(off, ulong, 0444);

static int bare_pre(struct kprobe *p, struct pt_regs *regs)
{
	return 0;
}

static struct kprobe bare_kp = {
	.pre_handler = bare_pre,
};

static int __init bare_init(void)
{
	int err;

	bare_kp.symbol_name = sym;
	bare_kp.offset = off;
	err = register_kprobe(&bare_kp);
	if (err)
		pr_err("register_kprobe %s+%#lx: %d\n", sym, off, err);
	return err;
}

static void __exit bare_exit(void)
{
	unregister_kprobe(&bare_kp);
}

module_init(bare_init);
module_exit(bare_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("an empty kprobe: the baseline of klasy's hook benchmark");
