// SPDX-License-Identifier: GPL-2.0
//go:build ignore

/*
 * Hooks on the kernel's static tracepoints
 * (KLASY_HOOK_TRACEPOINT): the advice module's probe, which has the
 * event's prototype, registered on the struct tracepoint of that name
 * with tracepoint_probe_register, the hook as its data. Registering is
 * what enables it, so klasy_core.c calls klasy_tp_register where it
 * enables kprobes and klasy_tp_unregister where it disables them.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/kernel.h>
#include <linux/string.h>
#include <linux/tracepoint.h>

#include "klasy_internal.h"

static void klasy_tp_match(struct tracepoint *tp, void *priv)
{
	struct klasy_hook *h = priv;

	if (!h->tp && !strcmp(tp->name, h->tracepoint))
		h->tp = tp;
}

int klasy_tp_register(struct klasy_hook *h)
{
	int err;

	/* The kernel's own tracepoints; modules' are not looked for yet. */
	h->tp = NULL;
	for_each_kernel_tracepoint(klasy_tp_match, h);
	if (!h->tp)
		return -ENOENT;
	err = tracepoint_probe_register(h->tp, h->probe, h);
	if (err)
		h->tp = NULL;
	return err;
}

void klasy_tp_unregister(struct klasy_hook *h)
{
	if (!h->tp)
		return;
	tracepoint_probe_unregister(h->tp, h->probe, h);
	h->tp = NULL;
	h->aspect->tp_unregistered = true;
}

void klasy_tp_sync(struct klasy_aspect *a)
{
	/* No probe of a runs anywhere once this returns. */
	if (a->tp_unregistered)
		tracepoint_synchronize_unregister();
	a->tp_unregistered = false;
}
