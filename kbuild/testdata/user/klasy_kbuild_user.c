// SPDX-License-Identifier: GPL-2.0
/*
 * klasy_kbuild_user - calls klasy_kbuild_hello, exported by another
 * out-of-tree module: it links only when the build is given that
 * module's Module.symvers (KBUILD_EXTRA_SYMBOLS), as the weaver's advice
 * modules link against its runtime module.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>

int klasy_kbuild_hello(int x);

static int __init klasy_kbuild_user_init(void)
{
	pr_info("hello(1) = %d\n", klasy_kbuild_hello(1));
	return 0;
}

static void __exit klasy_kbuild_user_exit(void)
{
}

module_init(klasy_kbuild_user_init);
module_exit(klasy_kbuild_user_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("klasy kbuild test: uses another module's export");
