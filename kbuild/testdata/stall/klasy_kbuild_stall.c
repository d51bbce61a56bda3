// SPDX-License-Identifier: GPL-2.0
/* klasy_kbuild_stall - never compiled: its Kbuild stalls first. */
#include <linux/module.h>

MODULE_LICENSE("GPL");
