// SPDX-License-Identifier: GPL-2.0
/*
 * klasy_probe - a tiny out-of-tree module that the plugin tests build with
 * the klasy plugin (make -C KDIR M=$PWD KCFLAGS=-fplugin=.../klasy.so) to
 * check .debug_klasy survives module linking. It is never loaded.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <linux/skbuff.h>

struct probe_entry {
	int hits;
	struct list_head node;
};

static LIST_HEAD(probe_list);

noinline unsigned int klasy_probe_len(const struct sk_buff *skb)
{
	return skb->len - skb->data_len;
}
EXPORT_SYMBOL_GPL(klasy_probe_len);

static int __init klasy_probe_init(void)
{
	struct probe_entry *e;

	list_for_each_entry(e, &probe_list, node)
		e->hits++;
	return 0;
}

static void __exit klasy_probe_exit(void)
{
}

module_init(klasy_probe_init);
module_exit(klasy_probe_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("klasy plugin test module");
