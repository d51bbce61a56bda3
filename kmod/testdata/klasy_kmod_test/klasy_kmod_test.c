// SPDX-License-Identifier: GPL-2.0
/*
 * klasy_kmod_test - built with debug information for the kmod tests,
 * which strip it and hand it to a stand-in kernel; never loaded.
 */
#include <linux/module.h>

static int __init klasy_kmod_test_init(void)
{
	return 0;
}

static void __exit klasy_kmod_test_exit(void)
{
}

module_init(klasy_kmod_test_init);
module_exit(klasy_kmod_test_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("klasy kmod test");
