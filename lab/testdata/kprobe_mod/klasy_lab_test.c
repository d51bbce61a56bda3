// SPDX-License-Identifier: GPL-2.0
/*
 * A trivial module for the lab tests: it puts a kprobe on a syscall path
 * while loaded and reports how often it fired when unloaded, so a test
 * sees the probe in /sys/kernel/debug/kprobes/list and the count in dmesg.
 * It exports the count to klasy_lab_user, which holds it in use.
 */
#include <linux/atomic.h>
#include <linux/kprobes.h>
#include <linux/module.h>

static char *symbol = "do_sys_openat2";
module_param(symbol, charp, 0444);
MODULE_PARM_DESC(symbol, "function to probe");

static atomic_t hits = ATOMIC_INIT(0);

static int pre(struct kprobe *p, struct pt_regs *regs)
{
	atomic_inc(&hits);
	return 0;
}

int klasy_lab_test_hits(void)
{
	return atomic_read(&hits);
}
EXPORT_SYMBOL_GPL(klasy_lab_test_hits);

static struct kprobe kp = {
	.pre_handler = pre,
};

static int __init klasy_lab_test_init(void)
{
	int ret;

	kp.symbol_name = symbol;
	ret = register_kprobe(&kp);
	if (ret < 0) {
		pr_err("klasy_lab_test: register_kprobe(%s): %d\n", symbol, ret);
		return ret;
	}
	pr_info("klasy_lab_test: probing %s at %px\n", symbol, kp.addr);
	return 0;
}

static void __exit klasy_lab_test_exit(void)
{
	unregister_kprobe(&kp);
	pr_info("klasy_lab_test: unloaded after %d hits on %s\n", atomic_read(&hits), symbol);
}

module_init(klasy_lab_test_init);
module_exit(klasy_lab_test_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("klasy lab test: a kprobe while loaded");
