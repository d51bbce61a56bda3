// SPDX-License-Identifier: GPL-2.0
//go:build ignore

/*
 * klasy_flow_kernel - what only the kernel has of the flow tables
 * (klasy_flow.c is the tables themselves): the module parameters, the
 * flows by name that advice modules attach to, the hooks on the free that
 * drop the entries of freed objects, and the flow lines of status. (The
 * go:build line above keeps Go from compiling this file.)
 *
 *   insmod klasy_runtime.ko flow_domain=1 flow_domains=2 flow_bits=12
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/ctype.h>
#include <linux/debugfs.h>
#include <linux/kprobes.h>
#include <linux/list.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/ptrace.h>
#include <linux/rculist.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/tracepoint.h>
#include <trace/events/kmem.h>

#include "klasy_flow.h"

static unsigned int flow_bits = KLASY_FLOW_BITS_DEFAULT;
module_param(flow_bits, uint, 0444);
MODULE_PARM_DESC(flow_bits, "buckets per flow table, log2 (1..20, default 12; 16 entries per bucket at most)");
static unsigned int flow_domain;
module_param(flow_domain, uint, 0444);
MODULE_PARM_DESC(flow_domain, "this domain's number in the weave, the low bits of its flow IDs (default 0)");
static unsigned int flow_domains = 1;
module_param(flow_domains, uint, 0444);
MODULE_PARM_DESC(flow_domains, "domains in the weave (1..256, default 1)");
static bool flow_free_hook = true;
module_param(flow_free_hook, bool, 0444);
MODULE_PARM_DESC(flow_free_hook, "drop the entry of an object freed to the slab allocator (default on)");

/*
 * The flows advice modules attached, by name. Readers (the free hooks)
 * walk it under RCU; klasy_flows_mutex orders changes and status.
 */
static LIST_HEAD(klasy_flows);
static DEFINE_MUTEX(klasy_flows_mutex);
static bool klasy_free_hooked;

/* obj is being freed: no flow may keep it. */
static void klasy_flows_freed(const void *obj)
{
	struct klasy_flow *f;

	if (ZERO_OR_NULL_PTR(obj))
		return;
	rcu_read_lock();
	list_for_each_entry_rcu(f, &klasy_flows, node)
		klasy_flow_forget(f, obj);
	rcu_read_unlock();
}

bool klasy_flows_id_live(u32 id)
{
	struct klasy_flow *f;
	bool live = false;

	rcu_read_lock();
	list_for_each_entry_rcu(f, &klasy_flows, node) {
		live = klasy_flow_id_live(f, id);
		if (live)
			break;
	}
	rcu_read_unlock();
	return live;
}

static void klasy_probe_kfree(void *data, unsigned long call_site,
			      const void *ptr)
{
	klasy_flows_freed(ptr);
}

static void klasy_probe_kmem_cache_free(void *data, unsigned long call_site,
					const void *ptr,
					const struct kmem_cache *s)
{
	klasy_flows_freed(ptr);
}

/* kmem_cache_free_bulk(s, size, p) has no tracepoint. */
static int klasy_probe_free_bulk(struct kprobe *kp, struct pt_regs *regs)
{
	size_t i, n = regs_get_kernel_argument(regs, 1);
	void **p = (void **)regs_get_kernel_argument(regs, 2);

	for (i = 0; i < n; i++)
		klasy_flows_freed(p[i]);
	return 0;
}

static struct kprobe klasy_free_bulk_kp = {
	.symbol_name = "kmem_cache_free_bulk",
	.pre_handler = klasy_probe_free_bulk,
};

static void klasy_unhook_free(void)
{
	if (!klasy_free_hooked)
		return;
	unregister_kprobe(&klasy_free_bulk_kp);
	unregister_trace_kmem_cache_free(klasy_probe_kmem_cache_free, NULL);
	unregister_trace_kfree(klasy_probe_kfree, NULL);
	/* No probe of ours runs any more once this returns. */
	tracepoint_synchronize_unregister();
	klasy_free_hooked = false;
}

/* All three or none; without them only the bound keeps stale entries. */
static void klasy_hook_free(void)
{
	int err;

	if (!flow_free_hook || klasy_free_hooked)
		return;
	err = register_trace_kfree(klasy_probe_kfree, NULL);
	if (err)
		goto fail;
	err = register_trace_kmem_cache_free(klasy_probe_kmem_cache_free, NULL);
	if (err)
		goto unhook_kfree;
	/* A kprobe struct is registered anew each time: clear what it kept. */
	klasy_free_bulk_kp.addr = NULL;
	klasy_free_bulk_kp.flags = 0;
	err = register_kprobe(&klasy_free_bulk_kp);
	if (err)
		goto unhook_cache_free;
	klasy_free_hooked = true;
	return;

unhook_cache_free:
	unregister_trace_kmem_cache_free(klasy_probe_kmem_cache_free, NULL);
unhook_kfree:
	unregister_trace_kfree(klasy_probe_kfree, NULL);
	tracepoint_synchronize_unregister();
fail:
	pr_warn("flows: hooking the free failed (%d): freed objects leave entries until the bound evicts them\n",
		err);
}

static bool klasy_flow_name_ok(const char *name)
{
	const char *c;

	if (!name || !*name || strnlen(name, KLASY_FLOW_NAME_MAX) == KLASY_FLOW_NAME_MAX ||
	    (*name >= '0' && *name <= '9'))
		return false;
	for (c = name; *c; c++) {
		if (!isalnum(*c) && *c != '_')
			return false;
	}
	return true;
}

int klasy_flow_get(const char *name, struct klasy_flow **flow)
{
	struct klasy_flow *f;
	int err;

	*flow = NULL;
	if (!klasy_flow_name_ok(name)) {
		pr_err("flow name %s: want a C identifier of at most %d bytes\n",
		       name ? name : "(null)", KLASY_FLOW_NAME_MAX - 1);
		return -EINVAL;
	}
	mutex_lock(&klasy_flows_mutex);
	list_for_each_entry(f, &klasy_flows, node) {
		if (!strcmp(f->name, name)) {
			f->refs++;
			goto out;
		}
	}
	f = kzalloc(sizeof(*f), GFP_KERNEL);
	if (!f) {
		err = -ENOMEM;
		goto unlock;
	}
	err = klasy_flow_init(f, name, flow_bits);
	if (err) {
		kfree(f);
		goto unlock;
	}
	f->refs = 1;
	klasy_hook_free();
	list_add_tail_rcu(&f->node, &klasy_flows);
	pr_info("flow %s: %u buckets\n", f->name, 1U << f->bits);
out:
	*flow = f;
	err = 0;
unlock:
	mutex_unlock(&klasy_flows_mutex);
	return err;
}
EXPORT_SYMBOL_GPL(klasy_flow_get);

void klasy_flow_put(struct klasy_flow *f)
{
	if (!f)
		return;
	mutex_lock(&klasy_flows_mutex);
	if (WARN_ON_ONCE(!f->refs) || --f->refs) {
		mutex_unlock(&klasy_flows_mutex);
		return;
	}
	list_del_rcu(&f->node);
	if (list_empty(&klasy_flows))
		klasy_unhook_free();
	mutex_unlock(&klasy_flows_mutex);
	/* The free hooks may still walk the list past f. */
	synchronize_rcu();
	klasy_flow_destroy(f);
	kfree(f);
}
EXPORT_SYMBOL_GPL(klasy_flow_put);

int klasy_flows_init(void)
{
	if (flow_bits < KLASY_FLOW_BITS_MIN || flow_bits > KLASY_FLOW_BITS_MAX) {
		pr_err("flow_bits=%u out of range (%u..%u)\n", flow_bits,
		       KLASY_FLOW_BITS_MIN, KLASY_FLOW_BITS_MAX);
		return -EINVAL;
	}
	if (klasy_flow_setup_ids(flow_domain, flow_domains)) {
		pr_err("flow_domain=%u flow_domains=%u: want domain < domains <= %u\n",
		       flow_domain, flow_domains, KLASY_FLOW_DOMAINS_MAX);
		return -EINVAL;
	}
	return 0;
}

void klasy_flows_exit(void)
{
	/* Advice modules use our symbols: none can be left. */
	WARN_ON(!list_empty(&klasy_flows));
	klasy_unhook_free();
}

/*
 * What get_new_flowid() counted, in files of their own: status lines
 * have a fixed set of keys that weaver/records checks.
 */
static int klasy_flow_ids_show(struct seq_file *m, void *v)
{
	struct klasy_flow_id_counts c;

	klasy_flow_read_ids(&c);
	seq_printf(m, "wraps=%u skipped=%u none=%u\n", c.wraps, c.skipped,
		   c.none);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(klasy_flow_ids);

void klasy_flows_debugfs(struct dentry *dir)
{
	debugfs_create_file("flow_ids", 0444, dir, NULL, &klasy_flow_ids_fops);
}

void klasy_flows_show(struct seq_file *m)
{
	struct klasy_flow_counts c;
	struct klasy_flow *f;

	mutex_lock(&klasy_flows_mutex);
	list_for_each_entry(f, &klasy_flows, node) {
		klasy_flow_read(f, &c);
		seq_printf(m, "flow name=%s entries=%llu limit=%llu hits=%llu misses=%llu evictions=%llu freed=%llu ambiguous=%llu dropped=%llu noid=%llu\n",
			   f->name, c.entries, c.limit, c.sum.hits,
			   c.sum.misses, c.sum.evictions, c.sum.freed,
			   c.sum.ambiguous, c.sum.dropped, c.sum.noid);
	}
	mutex_unlock(&klasy_flows_mutex);
}
