// SPDX-License-Identifier: GPL-2.0
/*
 * klasy_kbuild_hello - the kbuild package's test module. It is built,
 * never loaded: its tag (-DKLASY_TAG=..., default "none") lands in
 * .modinfo so a test can tell two builds apart, and it exports a function
 * for klasy_kbuild_user to link against (KBUILD_EXTRA_SYMBOLS).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <linux/stringify.h>

#ifndef KLASY_TAG
#define KLASY_TAG none
#endif

int klasy_kbuild_hello(int x)
{
	return x + 1;
}
EXPORT_SYMBOL_GPL(klasy_kbuild_hello);

static int __init klasy_kbuild_hello_init(void)
{
	pr_info("tag %s\n", __stringify(KLASY_TAG));
	return 0;
}

static void __exit klasy_kbuild_hello_exit(void)
{
}

module_init(klasy_kbuild_hello_init);
module_exit(klasy_kbuild_hello_exit);
MODULE_INFO(klasy_tag, __stringify(KLASY_TAG));
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("klasy kbuild test: exports klasy_kbuild_hello");
