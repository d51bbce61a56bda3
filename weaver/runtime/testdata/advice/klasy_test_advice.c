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
 * The addresses are the running kernel's (after KASLR); *_image are the
 * vmlinux's, shown in status. Load klasy_runtime first:
 *
 *   insmod klasy_test_advice.ko entry=0x... entry_image=0x... [bad=0x...]
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/kprobes.h>
#include <linux/module.h>
#include <linux/sched.h>

#include "klasy_rt.h"

#define KLASY_TEST_MAGIC 0x6b6c617379ULL	/* "klasy" */

static unsigned long entry, entry_image, bad, bad_image;
static unsigned long mid[4];
static unsigned int nmid;
static char *bad_function = "bad";
static bool wide, ret = true;
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

static void klasy_advice_1(struct klasy_hit *__klasy_hit)
{
	STORE_DATA2(current->pid, KLASY_TEST_MAGIC);
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
	hit->n = 0;
	hit->dropped = 0;
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
	hit->n = 0;
	hit->dropped = 0;
	klasy_advice_2(hit, regs);
	klasy_emit(h, 2, hit);
	if (wide) {
		hit->n = 0;
		hit->dropped = 0;
		klasy_advice_3(hit);
		klasy_emit(h, 3, hit);
	}
	return 0;
}

static const u16 klasy_advice_entry[] = { 1 };
static const u16 klasy_advice_return[] = { 2, 3 };

static struct klasy_hook klasy_hooks[3 + ARRAY_SIZE(mid)];

static struct klasy_aspect klasy_aspect = {
	.name = "getppid",
	.owner = THIS_MODULE,
	.hooks = klasy_hooks,
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

static int __init klasy_test_advice_init(void)
{
	unsigned int i, n = 0, failed;
	int err;

	if (!entry)
		return -EINVAL;
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
	if (err)
		pr_err("aspect %s: hook %u failed: %d\n", klasy_aspect.name,
		       failed, err);
	return err;
}

static void __exit klasy_test_advice_exit(void)
{
	klasy_unregister_aspect(&klasy_aspect);
}

module_init(klasy_test_advice_init);
module_exit(klasy_test_advice_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("klasy runtime test: an advice module on getppid");
