// SPDX-License-Identifier: GPL-2.0
/*
 * smap_harness - klasy_smap.c's shared maps (MAP_SET, MAP_GET,
 * MAP_DELETE), taken out of the source by unit_test.go into
 * smap_extract.c with klasy_agg.c's klasy_key_add and klasy_key_eq, and
 * run on kern_user.h's stand-ins, one aspect with the maps a (the
 * default size) and b (MAP_SIZE(b, 100)):
 *
 *   smap_harness < SCRIPT
 *
 * Script lines (# starts a comment). A KEY is 1 to 4 values, each a
 * number or s:TEXT (a kernel string, KEY_STR); a MAP is a or b:
 *
 *   set MAP V KEY...        MAP_SET(MAP, V, KEY...)
 *   get MAP KEY... = V      MAP_GET_OR(MAP, absent, KEY...) must be V
 *   get MAP KEY... absent   ... must find nothing
 *   del MAP KEY... yes|no   MAP_DELETE(MAP, KEY...) must say so
 *   fill MAP N FROM         MAP_SET of the keys FROM..FROM+N-1, each its
 *                           own value
 *   hold MAP KEY...         another CPU holds KEY's bucket lock
 *   release                 it lets go
 *   nmi 0|1                 run in NMI context (trylock) or not
 *   count MAP entries=N overflow=N busy=N spins=N missed=N   check the
 *                           map (any subset; >= for at least); spins
 *                           counts cpu_relax() in all, missed the hits
 *                           of show's probe that klasy_enter refused
 *   show [MAP V KEY...]     read the stats (klasy_smap_show): an skey
 *                           line for every key held; with MAP..., an
 *                           advice hooked on the bucket unlock (ftrace-ops
 *                           on _raw_spin_unlock_irqrestore, a lockdep
 *                           kernel's lock_release tracepoint) runs on
 *                           the reader's CPU, behind klasy_enter, before
 *                           each unlock lets go: MAP_SET(MAP, V, KEY...)
 *
 * A lock taken while held (a spin that would never end) fails, as does
 * a lock left held after an operation. A failed check prints "line N:
 * ..." and exits 1.
 */
#include <inttypes.h>
#include <stdarg.h>

#include "kern_user.h"
#include "script.h"

/* The kernel's primitives klasy_smap.c uses, one thread. */
#define GFP_KERNEL 0
#define kcalloc(n, size, gfp) calloc(n, size)
#define kvcalloc(n, size, gfp) calloc(n, size)
#define kfree free
#define kvfree free
#define DIV_ROUND_UP(n, d) (((n) + (d) - 1) / (d))
static unsigned int roundup_pow_of_two(unsigned int n)
{
	unsigned int p = 1;

	while (p < n)
		p <<= 1;
	return p;
}
typedef struct {
	long counter;
} atomic_long_t;
#define atomic_long_inc(v) ((v)->counter++)
#define atomic_long_read(v) ((v)->counter)
#define atomic_long_dec(v) ((v)->counter--)
#define atomic_long_add_unless(v, a, u) ((v)->counter == (u) ? 0 : ((v)->counter += (a), 1))
typedef struct {
	int locked;
} raw_spinlock_t;
static int nmi, held;
#define in_nmi() nmi
static int spins;
#define cpu_relax() (spins++)
#define raw_spin_lock_init(l) ((l)->locked = 0)
static void spin_would_hang(void);
static void probe_unlock(void);
static void lock_it(raw_spinlock_t *l)
{
	if (l->locked)
		spin_would_hang();
	l->locked = 1;
	held++;
}

/* A hook on the unlock runs at its entry: the lock still held. */
static void unlock_it(raw_spinlock_t *l)
{
	probe_unlock();
	l->locked = 0;
	held--;
}
#define raw_spin_lock_irqsave(l, f) do { (void)(f); lock_it(l); } while (0)
#define raw_spin_lock(l) lock_it(l)
#define raw_spin_trylock_irqsave(l, f) \
	((void)(f), (l)->locked ? 0 : ((l)->locked = 1, held++, 1))
#define raw_spin_unlock_irqrestore(l, f) ((void)(f), unlock_it(l))
#define raw_spin_unlock(l) unlock_it(l)
#define local_irq_save(f) ((f) = 0)
#define local_irq_restore(f) ((void)(f))
#define barrier() __asm__ __volatile__("" ::: "memory")

/* The stats file: its text in buf. */
struct seq_file {
	char *buf;
	size_t len;
};

/* No format check: the kernel's u64 is unsigned long long, ours is not. */
static void seq_printf(struct seq_file *sf, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	sf->buf = realloc(sf->buf, sf->len + n + 1);
	va_start(ap, fmt);
	vsnprintf(sf->buf + sf->len, n + 1, fmt, ap);
	va_end(ap);
	sf->len += n;
}

static void klasy_put_token(struct seq_file *sf, const char *s)
{
	seq_printf(sf, "%s", s);
}
#define kvmalloc_array(n, size, gfp) calloc(n, size)

/* lib/jhash.h's jhash2 is the kernel's; any hash of the words does. */
static u32 jhash2(const u32 *k, u32 len, u32 init)
{
	u32 h = init ^ 0x9e3779b9;

	while (len--)
		h = (h ^ *k++) * 0x01000193;
	return h ^ h >> 15;
}

/* enum klasy_val_kind of klasy_rt.h. */
#define KLASY_VAL_KSTR 1
#define KLASY_VAL_USTR 2
#define KLASY_VAL_KSTACK 3

/* klasy_read_str: the harness's strings are readable kernel memory. */
static long klasy_read_str(char *buf, u32 kind, const void *p, long cap)
{
	long n = strnlen(p, cap);

	memcpy(buf, p, n < cap ? n + 1 : cap);
	return n < cap ? n + 1 : cap;
}

struct klasy_smap;
struct klasy_aspect {
	const char *name;
	unsigned int nsmaps;
	const char *const *smap_names;
	const u32 *smap_sizes;
	struct klasy_smap *smaps;
};

struct klasy_hit;
extern struct klasy_hit klasy_hit;

#include "smap_extract.c"

/* The CPU's klasy_hit: busy while a handler (klasy_enter) runs. */
struct klasy_hit klasy_hit;

/* show's probe: the advice on the unlock, and its refused hits. */
static struct klasy_aspect *probe_aspect;
static int probe_map = -1;
static struct klasy_key probe_key;
static u64 probe_v;
static long probe_missed;

static void probe_unlock(void)
{
	if (probe_map < 0)
		return;
	if (klasy_hit.busy) {	/* klasy_enter refuses it */
		probe_missed++;
		return;
	}
	klasy_hit.busy = 1;
	klasy_smap_set(probe_aspect, probe_map, &probe_key, probe_v);
	klasy_hit.busy = 0;
}

int klasy_user_cpu;
struct task_struct *klasy_user_current;

u64 ktime_get_mono_fast_ns(void)
{
	return 0;
}

u64 sched_clock_cpu(int cpu)
{
	return 0;
}

static void spin_would_hang(void)
{
	fail("a lock taken while held: it would spin for ever");
}

static unsigned int map_of(const char *s)
{
	if (!s || (strcmp(s, "a") && strcmp(s, "b")))
		fail("map %s: want a or b", s ? s : "(none)");
	return s[0] - 'a';
}

/* key makes the key of args[0..n), as the _BY macros make one. */
static void key(struct klasy_key *k, char **args, int n)
{
	int i;

	memset(k, 0, sizeof(*k));
	if (n < 1 || n > 4)
		fail("a key has 1 to 4 values, not %d", n);
	for (i = 0; i < n; i++) {
		if (!strncmp(args[i], "s:", 2))
			klasy_key_add(k, KLASY_VAL_KSTR, (u64)(unsigned long)(args[i] + 2));
		else
			klasy_key_add(k, 0, script_num(args[i]));
	}
}

int main(void)
{
	static const char *const names[] = { "a", "b" };
	static const u32 sizes[] = { 0, 100 };
	struct klasy_aspect aspect = { .name = "t", .nsmaps = 2, .smap_names = names, .smap_sizes = sizes };
	struct klasy_smap_bucket *holding = NULL;
	char line[1024], *args[SCRIPT_ARGS];
	struct klasy_key k;
	int nargs, i;

	if (klasy_smap_alloc(&aspect))
		fail("klasy_smap_alloc failed");
	while (fgets(line, sizeof(line), stdin)) {
		line_no++;
		nargs = script_args(line, args);
		if (!nargs)
			continue;
		if (!strcmp(args[0], "set")) {
			if (nargs < 4)
				fail("set MAP V KEY...");
			key(&k, args + 3, nargs - 3);
			klasy_smap_set(&aspect, map_of(args[1]), &k, script_num(args[2]));
		} else if (!strcmp(args[0], "get")) {
			bool absent = !strcmp(args[nargs - 1], "absent");
			int nk = nargs - 2 - (absent ? 1 : 2);
			u64 v = 0xdeadbeef;
			bool found;

			if (nk < 1 || (!absent && strcmp(args[nargs - 2], "=")))
				fail("get MAP KEY... = V, or get MAP KEY... absent");
			key(&k, args + 2, nk);
			found = klasy_smap_get(&aspect, map_of(args[1]), &k, &v);
			if (absent && (found || v != 0xdeadbeef))
				fail("get: found %" PRIu64 ", want absent", v);
			if (!absent && !found)
				fail("get: absent, want %s", args[nargs - 1]);
			if (!absent && v != script_num(args[nargs - 1]))
				fail("get: %" PRIu64 ", want %s", v, args[nargs - 1]);
		} else if (!strcmp(args[0], "del")) {
			bool want = !strcmp(args[nargs - 1], "yes");

			if (nargs < 4 || (!want && strcmp(args[nargs - 1], "no")))
				fail("del MAP KEY... yes|no");
			key(&k, args + 2, nargs - 3);
			if (klasy_smap_delete(&aspect, map_of(args[1]), &k) != want)
				fail("del: %s, want %s", want ? "no" : "yes", args[nargs - 1]);
		} else if (!strcmp(args[0], "fill")) {
			unsigned int m = map_of(args[1]);
			u64 n = script_num(args[2]), from = script_num(args[3]);

			for (; n; n--, from++) {
				key(&k, (char *[]){ "0" }, 1);
				k.w[0] = from;
				klasy_smap_set(&aspect, m, &k, from * 10);
			}
		} else if (!strcmp(args[0], "hold")) {
			unsigned long flags;

			if (nargs < 3)
				fail("hold MAP KEY...");
			key(&k, args + 2, nargs - 2);
			holding = klasy_smap_lock(&aspect, map_of(args[1]), &k, &flags);
			if (!holding)
				fail("hold: the bucket could not be locked");
			held--;	/* another CPU's */
		} else if (!strcmp(args[0], "release")) {
			if (!holding)
				fail("release: nothing held");
			holding->lock.locked = 0;
			holding = NULL;
		} else if (!strcmp(args[0], "nmi")) {
			nmi = script_num(args[1]);
		} else if (!strcmp(args[0], "count")) {
			struct klasy_smap *m = &aspect.smaps[map_of(args[1])];
			unsigned int b, w, entries = 0;

			for (b = 0; b < m->nbuckets; b++)
				for (w = 0; w < KLASY_SMAP_WAYS; w++)
					entries += !!m->b[b].e[w].key.nw;
			for (i = 2; i < nargs; i++) {
				char *eq = strchr(args[i], '=');
				bool least = eq && eq > args[i] && eq[-1] == '>';
				u64 got;

				if (!eq)
					fail("count: %s is not KEY=VAL", args[i]);
				*eq = '\0';
				if (least)
					eq[-1] = '\0';
				if (!strcmp(args[i], "entries"))
					got = entries;
				else if (!strcmp(args[i], "overflow"))
					got = atomic_long_read(&m->overflow);
				else if (!strcmp(args[i], "busy"))
					got = atomic_long_read(&m->busy);
				else if (!strcmp(args[i], "spins"))
					got = spins;
				else if (!strcmp(args[i], "missed"))
					got = probe_missed;
				else
					fail("count: no count %s", args[i]);
				if (least ? got < script_num(eq + 1) : got != script_num(eq + 1))
					fail("%s=%" PRIu64 ", want %s%s", args[i], got, least ? "at least " : "", eq + 1);
			}
			if (m->used.counter != entries)
				fail("the map counts %ld keys, holds %u", m->used.counter, entries);
		} else if (!strcmp(args[0], "show")) {
			struct seq_file sf = {};
			unsigned int keys = 0, lines = 0, m, b, w;
			char *p;

			if (nargs > 1) {
				if (nargs < 4)
					fail("show MAP V KEY...");
				probe_aspect = &aspect;
				probe_map = map_of(args[1]);
				probe_v = script_num(args[2]);
				key(&probe_key, args + 3, nargs - 3);
			}
			if (klasy_smap_show(&sf, &aspect))
				fail("klasy_smap_show failed");
			probe_map = -1;
			for (m = 0; m < aspect.nsmaps; m++)
				for (b = 0; b < aspect.smaps[m].nbuckets; b++)
					for (w = 0; w < KLASY_SMAP_WAYS; w++)
						keys += !!aspect.smaps[m].b[b].e[w].key.nw;
			for (p = sf.buf; p && (p = strstr(p, "skey ")); p++)
				lines++;
			if (lines != keys)
				fail("show: %u skey lines, the maps hold %u keys\n%s", lines, keys, sf.buf);
			if (klasy_hit.busy)
				fail("show left the CPU marked as running a handler");
			free(sf.buf);
		} else {
			fail("unknown operation %s", args[0]);
		}
		if (held)
			fail("%d bucket locks left held", held);
	}
	klasy_smap_free(&aspect);
	printf("ok %d lines\n", line_no);
	return 0;
}
