// SPDX-License-Identifier: GPL-2.0
/*
 * klasy_kbuild_bad - a module that does not compile, as generated C with
 * a mistake in its advice would not: the test reads the "want" comments
 * and expects a diagnostic of that severity naming that identifier at that
 * line, as the compiler reports it: in this file before the #line
 * directive, in the aspect file it names after it.
 */
#include <linux/module.h>

static int before(void)
{
	return undeclared_in_c; /* want error: undeclared_in_c */
}

#line 40 "aspects/bad.klasy"
static int __init klasy_kbuild_bad_init(void)
{
	int unused_in_aspect; /* want warning: unused_in_aspect */

	return undeclared_in_aspect + before(); /* want error: undeclared_in_aspect */
}

module_init(klasy_kbuild_bad_init);
MODULE_LICENSE("GPL");
