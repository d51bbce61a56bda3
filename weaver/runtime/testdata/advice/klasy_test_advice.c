// SPDX-License-Identifier: GPL-2.0
/*
 * klasy_test_advice - a hand-written advice module, shaped as the ones
 * klasy generates, for the runtime's lab test. One aspect, "getppid":
 *
 *   hook 0: a kprobe at the entry of the function at `entry`, advice 1
 *           stores current->pid and KLASY_TEST_MAGIC;
 *   then:   a kprobe at each address in `mid` (inside that function),
 *           advice 1 again;
 *   then:   only when `bad` is set, a kprobe there (the kernel should
 *           refuse it, and with it the whole aspect), advice 1 again;
 *   last:   unless ret=0, a kretprobe on the same function, advice 2
 *           stores its return value and, with wide=1, advice 3 stores 18
 *           values (16 kept, 2 counted as dropped).
 *
 * With flow=1 it attaches two flow tables. Its init runs a scenario on
 * "labinit" (a copy, a move, a quit, a truncated ID, an object freed
 * without quit) and fails if a lookup answers wrong, leaving status:
 * entries=0 hits=3 misses=3 evictions=0 freed=1 ambiguous=1 dropped=0.
 * Advice 1 then registers each task calling getppid in "labtask", once.
 *
 * The addresses are the running kernel's (after KASLR); *_image are the
 * vmlinux's, shown in status. Load klasy_runtime first:
 *
 *   insmod klasy_test_advice.ko entry=0x... entry_image=0x... [bad=0x...]
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/kprobes.h>
#include <linux/module.h>
#include <linux/sched.h>
#include <linux/slab.h>

#include "klasy_rt.h"

#define KLASY_TEST_MAGIC 0x6b6c617379ULL	/* "klasy" */

static unsigned long entry, entry_image, bad, bad_image;
static unsigned long mid[4];
static unsigned int nmid;
static char *bad_function = "bad";
static bool wide, ret = true, flow;
module_param(entry, ulong, 0444);
MODULE_PARM_DESC(entry, "address of the function to hook, running kernel");
module_param(entry_image, ulong, 0444);
MODULE_PARM_DESC(entry_image, "the same in the image");
module_param_array(mid, ulong, &nmid, 0444);
MODULE_PARM_DESC(mid, "addresses inside that function for more kprobes");
module_param(bad, ulong, 0444);
MODULE_PARM_DESC(bad, "an address the kernel refuses: a hook between the two others");
module_param(bad_image, ulong, 0444);
MODULE_PARM_DESC(bad_image, "the same in the image");
module_param(bad_function, charp, 0444);
MODULE_PARM_DESC(bad_function, "the function bad is in");
module_param(ret, bool, 0444);
MODULE_PARM_DESC(ret, "add the kretprobe (default on)");
module_param(wide, bool, 0444);
MODULE_PARM_DESC(wide, "add advice 3 after, storing more values than a record holds");
module_param(flow, bool, 0444);
MODULE_PARM_DESC(flow, "attach the flows labinit (a scenario at init) and labtask (advice 1)");

KLASY_DECLARE_FLOW(labinit);
KLASY_DECLARE_FLOW(labtask);

/* A shared map, as the generated module numbers and names them. */
enum { __klasy_map_lastpid = 0 };
static const char *const klasy_smap_names[] = { "lastpid" };

static struct klasy_hook klasy_hooks[3 + ARRAY_SIZE(mid)];

static void klasy_advice_1(struct klasy_hit *__klasy_hit)
{
	STORE_DATA2(current->pid, KLASY_TEST_MAGIC);
	/* The macros, built with W=1: the pid that called last, by comm. */
	MAP_SIZE(lastpid, 64);
	if (MAP_GET_OR(lastpid, 1, KEY_STR(current->comm)) != current->pid)
		MAP_SET(lastpid, current->pid, KEY_STR(current->comm));
	if (!current->pid)
		MAP_DELETE(lastpid, KEY_STR(current->comm));
	if (flow && !get_flowid(labtask, current))
		register_flowid(labtask, current, get_new_flowid());
}

static void klasy_advice_2(struct klasy_hit *__klasy_hit, struct pt_regs *regs)
{
	STORE_DATA(regs_return_value(regs));
}

static void klasy_advice_3(struct klasy_hit *__klasy_hit)
{
	int i;

	for (i = 0; i < KLASY_MAX_VALUES + 2; i++)
		STORE_DATA(i);
}

static int klasy_trampoline_entry(struct kprobe *p, struct pt_regs *regs)
{
	struct klasy_hook *h = container_of(p, struct klasy_hook, rp.kp);
	struct klasy_hit *hit = this_cpu_ptr(&klasy_hit);

	klasy_count_hit(h);
	klasy_hit_begin(hit);
	klasy_advice_1(hit);
	klasy_emit(h, 1, hit);
	return 0;
}

static int klasy_trampoline_return(struct kretprobe_instance *ri,
				   struct pt_regs *regs)
{
	struct klasy_hook *h = container_of(get_kretprobe(ri), struct klasy_hook, rp);
	struct klasy_hit *hit = this_cpu_ptr(&klasy_hit);

	klasy_count_hit(h);
	klasy_hit_begin(hit);
	klasy_advice_2(hit, regs);
	klasy_emit(h, 2, hit);
	if (wide) {
		klasy_hit_begin(hit);
		klasy_advice_3(hit);
		klasy_emit(h, 3, hit);
	}
	return 0;
}

static const u16 klasy_advice_entry[] = { 1 };
static const u16 klasy_advice_return[] = { 2, 3 };

static struct klasy_aspect klasy_aspect = {
	.name = "getppid",
	.owner = THIS_MODULE,
	.hooks = klasy_hooks,
	.nsmaps = ARRAY_SIZE(klasy_smap_names),
	.smap_names = klasy_smap_names,
};

static void klasy_fill(struct klasy_hook *h, enum klasy_hook_kind kind,
		       unsigned long addr, unsigned long image, const char *fn)
{
	h->kind = kind;
	h->rp.kp.addr = (kprobe_opcode_t *)addr;
	h->image_addr = image;
	h->function = fn;
	h->file = "kernel/sys.c";
	h->line = 968;
	if (kind == KLASY_HOOK_KRETPROBE) {
		h->rp.handler = klasy_trampoline_return;
		h->advice = klasy_advice_return;
		h->nadvice = wide ? 2 : 1;
	} else {
		h->rp.kp.pre_handler = klasy_trampoline_entry;
		h->advice = klasy_advice_entry;
		h->nadvice = 1;
	}
}

#define KLASY_EXPECT(what, got, want) do { \
	int __got = (got), __want = (want); \
	if (__got != __want) { \
		pr_err("flow labinit: %s: ID %#x, want %#x\n", (what), __got, __want); \
		err = -EINVAL; \
	} \
} while (0)

/*
 * The scenario the translated xflow advice would play on three objects,
 * with the dissertation's functions; lookups count hits and misses.
 */
static int klasy_flow_scenario(void)
{
	void *a, *b, *c, *p;
	int x, id, err = 0;

	a = kmalloc(64, GFP_KERNEL);
	b = kmalloc(64, GFP_KERNEL);
	c = kmalloc(64, GFP_KERNEL);
	if (!a || !b || !c) {
		err = -ENOMEM;
		goto free;
	}
	x = get_new_flowid();
	register_flowid(labinit, a, x);				/* start */
	KLASY_EXPECT("a after start", get_flowid(labinit, a), x);	/* hit 1 */
	KLASY_EXPECT("b before copy", get_flowid(labinit, b), 0);	/* miss 1 */
	id = get_flowid(labinit, a);				/* copy a -> b: hit 2 */
	register_flowid(labinit, b, id);
	id = get_flowid(labinit, b);				/* move b -> c: hit 3 */
	register_flowid(labinit, c, id);
	remove_flowid(labinit, b);
	KLASY_EXPECT("b after move", get_flowid(labinit, b), 0);	/* miss 2 */
	remove_flowid(labinit, c);				/* quit */
	/* Live: a (x) and c (x + 4096): equal in their low 12 bits. */
	register_flowid(labinit, c, x + 4096);
	truncate_flowid(labinit, x, 12);			/* ambiguous 1 */
	truncate_flowid(labinit, x, 13);
	remove_flowid(labinit, c);
	/* a is freed without quit: its entry goes with it (freed 1). */
	kfree(a);
	p = kmalloc(64, GFP_KERNEL);
	if (p) {
		pr_info("flow labinit: the next object is %s address\n",
			p == a ? "at the freed one's" : "at another");
		KLASY_EXPECT("the next object", get_flowid(labinit, p), 0);	/* miss 3 */
		kfree(p);
	}
	a = NULL;
free:
	kfree(a);
	kfree(b);
	kfree(c);
	return err;
}

static void klasy_flow_detach(void)
{
	KLASY_FLOW_PUT(labtask);
	KLASY_FLOW_PUT(labinit);
}

static int __init klasy_test_advice_init(void)
{
	unsigned int i, n = 0, failed;
	int err;

	if (!entry)
		return -EINVAL;
	if (flow) {
		err = KLASY_FLOW_GET(labinit);
		if (!err)
			err = KLASY_FLOW_GET(labtask);
		if (!err)
			err = klasy_flow_scenario();
		if (err) {
			klasy_flow_detach();
			return err;
		}
	}
	klasy_fill(&klasy_hooks[n++], KLASY_HOOK_KPROBE, entry, entry_image,
		   "__x64_sys_getppid");
	for (i = 0; i < nmid; i++)
		klasy_fill(&klasy_hooks[n++], KLASY_HOOK_KPROBE, mid[i],
			   entry_image + (mid[i] - entry), "__x64_sys_getppid");
	if (bad)
		klasy_fill(&klasy_hooks[n++], KLASY_HOOK_KPROBE, bad, bad_image,
			   bad_function);
	if (ret)
		klasy_fill(&klasy_hooks[n++], KLASY_HOOK_KRETPROBE, entry,
			   entry_image, "__x64_sys_getppid");
	klasy_aspect.nhooks = n;
	err = klasy_register_aspect(&klasy_aspect, &failed);
	if (err) {
		pr_err("aspect %s: hook %u failed: %d\n", klasy_aspect.name,
		       failed, err);
		if (flow)
			klasy_flow_detach();
	}
	return err;
}

static void __exit klasy_test_advice_exit(void)
{
	klasy_unregister_aspect(&klasy_aspect);
	/* No advice runs any more: the flows can go. */
	if (flow)
		klasy_flow_detach();
}

module_init(klasy_test_advice_init);
module_exit(klasy_test_advice_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("klasy runtime test: an advice module on getppid");
