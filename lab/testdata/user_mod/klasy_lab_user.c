// SPDX-License-Identifier: GPL-2.0
/*
 * A module for the lab tests that uses klasy_lab_test's export, as an
 * advice module uses the weaver's runtime: built against klasy_lab_test's
 * Module.symvers, it loads only after klasy_lab_test and keeps it from
 * unloading while it is loaded.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>

int klasy_lab_test_hits(void);

static int __init klasy_lab_user_init(void)
{
	pr_info("klasy_lab_test has %d hits\n", klasy_lab_test_hits());
	return 0;
}

static void __exit klasy_lab_user_exit(void)
{
}

module_init(klasy_lab_user_init);
module_exit(klasy_lab_user_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("klasy lab test: uses klasy_lab_test's export");
