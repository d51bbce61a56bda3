// SPDX-License-Identifier: GPL-2.0
/*
 * klasy_lp - a livepatch of cmdline_proc_show, as the kernel's
 * samples/livepatch/livepatch-sample.c: /proc/cmdline reads "patched by
 * klasy_lp". The weaver's lab test loads it to see that klasy refuses to
 * replace a function a livepatch replaces (ftrace lets one user change a
 * function's return path: FTRACE_OPS_FL_IPMODIFY).
 *
 *   insmod klasy_lp.ko
 *   echo 0 > /sys/kernel/livepatch/klasy_lp/enabled; rmmod klasy_lp
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/kernel.h>
#include <linux/livepatch.h>
#include <linux/module.h>
#include <linux/seq_file.h>

static int klasy_lp_cmdline_proc_show(struct seq_file *m, void *v)
{
	seq_puts(m, "patched by klasy_lp\n");
	return 0;
}

static struct klp_func funcs[] = {
	{
		.old_name = "cmdline_proc_show",
		.new_func = klasy_lp_cmdline_proc_show,
	}, { }
};

static struct klp_object objs[] = {
	{
		/* name NULL: vmlinux */
		.funcs = funcs,
	}, { }
};

static struct klp_patch patch = {
	.mod = THIS_MODULE,
	.objs = objs,
};

static int __init klasy_lp_init(void)
{
	return klp_enable_patch(&patch);
}

static void __exit klasy_lp_exit(void)
{
}

module_init(klasy_lp_init);
module_exit(klasy_lp_exit);
MODULE_LICENSE("GPL");
MODULE_INFO(livepatch, "Y");
MODULE_DESCRIPTION("klasy test: a livepatch of cmdline_proc_show");
