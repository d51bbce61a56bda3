// SPDX-License-Identifier: GPL-2.0
/*
 * harness - klasy_flow.c, the runtime's flow table, in user space
 * (flow_user.h stands in for the kernel), for flow_test.go:
 *
 *   harness script < SCRIPT         run a script of operations and checks
 *   harness stress THREADS ROUNDS [nmi]  concurrent use, checked; with
 *                                   nmi, each thread's registers, lookups
 *                                   and removes run in "NMI" (in_nmi())
 *   harness bench THREADS OPS REPS  ns per operation, Table 6.7's rows
 *
 * Script lines (# starts a comment; OBJ is any name, each a distinct
 * 64-byte object, zeroed; VAL is a number, $VAR, $VAR&N or $VAR+N):
 *
 *   domain D N         IDs of domain D of N
 *   flow NAME [BITS]   a new table, 2^BITS buckets (default 4); current
 *   use NAME           make NAME current
 *   id VAR             VAR = get_new_flowid()
 *   new OBJ VAR        VAR = get_new_flowid(), registered for OBJ
 *   reg OBJ VAL        register_flowid
 *   get OBJ VAL        check get_flowid(OBJ) == VAL
 *   take OBJ VAR       VAR = get_flowid(OBJ), which must not be 0
 *   rm OBJ             remove_flowid
 *   free OBJ           the free hook: OBJ is freed (and zeroed, a new object)
 *   trunc VAL BITS     truncate_flowid
 *   truncs N VAL BITS MS  truncate_flowid N times, in at most MS ms
 *   ids N              get_new_flowid() N times
 *   between VAR        in the next get_new_flowid(), right after its
 *                      counter's increment, another CPU's: VAR = its ID
 *   idstats KEY=VAL... check what get_new_flowid counted (wraps skipped
 *                      none)
 *   call ADVICE OBJ... run a translated advice with OBJ... as its variables
 *   saw VAL            check the last user advice ran with VAL (0: it did not)
 *   eq VAL VAL         check equal;  ne VAL VAL: check different
 *   stats KEY=VAL...   check the current table's counts (entries limit hits
 *                      misses evictions freed ambiguous dropped noid)
 *   idchain N          check no bucket of the current table's ID index
 *                      holds more than N entries
 *   print              print the status line of every table
 *   nmi 1|0            enter or leave NMI context (in_nmi()); leaving runs
 *                      the irq_works the thread queued, as the kernel does
 *                      once an NMI returns
 *   pool N             check this thread's pool of the current table holds
 *                      N entries (counted on its list, and its count)
 *   onlock N reg OBJ VAL | onlock N rm OBJ
 *                      at the Nth bucket lock taken or tried from now on
 *                      (1: the next), right before it, register or remove
 *                      in the current table, once: advice of a hook on
 *                      the kernel's _raw_spin_lock, run inside whatever
 *                      the table is doing
 *
 * A failed check prints "line N: ..." and exits 1.
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <time.h>

#include "harness.h"
#include "../unit/script.h"

static void die(const char *what)
{
	fprintf(stderr, "harness: %s\n", what);
	exit(2);
}

/* ---- script ---- */

#define MAX_NAMES 256
#define OBJ_SIZE 64

static _Alignas(64) char arena[MAX_NAMES][OBJ_SIZE];
static char *obj_names[MAX_NAMES];
static int nobjs;

static struct {
	char *name;
	u32 val;
} vars[MAX_NAMES];
static int nvars;

static struct klasy_flow *flows[MAX_NAMES];
static int nflows;
static struct klasy_flow *cur;

static int last_saw;
int klasy_user_flow;

/* "between": the variable another CPU's ID goes to, once. */
static u32 *between;

void klasy_user_after_inc(void)
{
	u32 *v = between;

	if (!v)
		return;
	between = NULL;
	*v = (u32)klasy_flow_new_id();
}

static void *obj(const char *name)
{
	int i;

	for (i = 0; i < nobjs; i++) {
		if (!strcmp(obj_names[i], name))
			return arena[i];
	}
	if (nobjs == MAX_NAMES)
		fail("too many objects");
	obj_names[nobjs] = strdup(name);
	return arena[nobjs++];
}

static u32 *var(const char *name, bool create)
{
	int i;

	for (i = 0; i < nvars; i++) {
		if (!strcmp(vars[i].name, name))
			return &vars[i].val;
	}
	if (!create)
		fail("no variable %s", name);
	if (nvars == MAX_NAMES)
		fail("too many variables");
	vars[nvars].name = strdup(name);
	return &vars[nvars++].val;
}

/* N, $VAR, $VAR&N or $VAR+N. */
static u32 val(const char *s)
{
	char name[64], *end;
	size_t len;
	u32 v, n;

	if (!s)
		fail("missing value");
	if (*s != '$') {
		v = (u32)strtoul(s, &end, 0);
		if (!*s || *end)
			fail("%s: not a number", s);
		return v;
	}
	len = strcspn(s + 1, "&+");
	if (len >= sizeof(name))
		fail("%s: name too long", s);
	memcpy(name, s + 1, len);
	name[len] = '\0';
	v = *var(name, false);
	if (!s[1 + len])
		return v;
	n = (u32)strtoul(s + 2 + len, &end, 0);
	if (!s[2 + len] || *end)
		fail("%s: not a number after %c", s, s[1 + len]);
	return s[1 + len] == '&' ? v & n : v + n;
}

static struct klasy_flow *flow_named(const char *name)
{
	int i;

	for (i = 0; i < nflows; i++) {
		if (!strcmp(flows[i]->name, name))
			return flows[i];
	}
	return NULL;
}

static void print_flow(struct klasy_flow *f)
{
	struct klasy_flow_counts c;

	klasy_flow_read(f, &c);
	printf("flow name=%s entries=%" PRIu64 " limit=%" PRIu64 " hits=%" PRIu64
	       " misses=%" PRIu64 " evictions=%" PRIu64 " freed=%" PRIu64
	       " ambiguous=%" PRIu64 " dropped=%" PRIu64 " noid=%" PRIu64 "\n",
	       f->name, c.entries, c.limit, c.sum.hits, c.sum.misses,
	       c.sum.evictions, c.sum.freed, c.sum.ambiguous, c.sum.dropped,
	       c.sum.noid);
}

static u64 count(struct klasy_flow_counts *c, const char *key)
{
	static const struct {
		const char *key;
		size_t off;
	} keys[] = {
		{ "entries", offsetof(struct klasy_flow_counts, entries) },
		{ "limit", offsetof(struct klasy_flow_counts, limit) },
		{ "hits", offsetof(struct klasy_flow_counts, sum.hits) },
		{ "misses", offsetof(struct klasy_flow_counts, sum.misses) },
		{ "evictions", offsetof(struct klasy_flow_counts, sum.evictions) },
		{ "freed", offsetof(struct klasy_flow_counts, sum.freed) },
		{ "ambiguous", offsetof(struct klasy_flow_counts, sum.ambiguous) },
		{ "dropped", offsetof(struct klasy_flow_counts, sum.dropped) },
		{ "noid", offsetof(struct klasy_flow_counts, sum.noid) },
	};
	size_t i;

	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		if (!strcmp(keys[i].key, key))
			return *(u64 *)((char *)c + keys[i].off);
	}
	fail("stats: no count %s", key);
	return 0;
}

static struct klasy_flow stress_flow, bench_flow;

/* klasy_flow.h: the tables of the "runtime" are the harness's. */
bool klasy_flows_id_live(u32 id)
{
	int i;

	for (i = 0; i < nflows; i++) {
		if (klasy_flow_id_live(flows[i], id))
			return true;
	}
	return (stress_flow.ids && klasy_flow_id_live(&stress_flow, id)) ||
	       (bench_flow.ids && klasy_flow_id_live(&bench_flow, id));
}

static u64 now_ns(void);

void klasy_user_saw(int id)
{
	last_saw = id;
}

static void call(char **args, int nargs)
{
	const struct klasy_user_advice *a = NULL;
	void *slots[16], *v[16];
	int i;

	for (i = 0; i < klasy_user_nadvice; i++) {
		if (!strcmp(klasy_user_advice[i].name, args[0]))
			a = &klasy_user_advice[i];
	}
	if (!a)
		fail("no advice %s", args[0]);
	if ((size_t)(nargs - 1) != strlen(a->params))
		fail("advice %s takes %zu objects", a->name, strlen(a->params));
	for (i = 0; i < nargs - 1; i++) {
		slots[i] = obj(args[i + 1]);
		v[i] = a->params[i] == 'l' ? (void *)&slots[i] : slots[i];
	}
	last_saw = 0;
	klasy_user_flow = 0;
	a->fn(v);
}

/* onlock: what runs at which lock (0: nothing). */
static int onlock_left;
static bool onlock_reg;
static void *onlock_obj;
static u32 onlock_val;
static struct klasy_flow *onlock_flow;

void klasy_user_on_lock(void)
{
	if (!onlock_left || --onlock_left)
		return;
	if (onlock_reg)
		klasy_flow_register(onlock_flow, onlock_obj, (int)onlock_val);
	else
		klasy_flow_remove(onlock_flow, onlock_obj);
}

static void need(struct klasy_flow *f)
{
	if (!f)
		fail("no flow: write flow NAME first");
}

static int script(void)
{
	char line[1024], *args[SCRIPT_ARGS];
	int nargs, i;

	while (fgets(line, sizeof(line), stdin)) {
		line_no++;
		nargs = script_args(line, args);
		if (!nargs)
			continue;
		char *op = args[0];

		if (!strcmp(op, "domain")) {
			if (klasy_flow_setup_ids(val(args[1]), val(args[2])))
				fail("domain %s of %s refused", args[1], args[2]);
		} else if (!strcmp(op, "flow")) {
			struct klasy_flow *f = calloc(1, sizeof(*f));
			int err;

			if (!args[1] || flow_named(args[1]))
				fail("flow: a new name, please");
			err = klasy_flow_init(f, args[1], args[2] ? val(args[2]) : 4);
			if (err)
				fail("klasy_flow_init: %d", err);
			for (i = 0; i < klasy_user_nflowvars; i++) {
				if (!strcmp(klasy_user_flowvars[i].name, f->name))
					*klasy_user_flowvars[i].var = f;
			}
			flows[nflows++] = cur = f;
		} else if (!strcmp(op, "use")) {
			cur = flow_named(args[1] ? args[1] : "");
			need(cur);
		} else if (!strcmp(op, "between")) {
			between = var(args[1], true);
		} else if (!strcmp(op, "id")) {
			*var(args[1], true) = (u32)klasy_flow_new_id();
		} else if (!strcmp(op, "new")) {
			u32 *v = var(args[2], true);

			need(cur);
			*v = (u32)klasy_flow_new_id();
			klasy_flow_register(cur, obj(args[1]), (int)*v);
		} else if (!strcmp(op, "reg")) {
			need(cur);
			klasy_flow_register(cur, obj(args[1]), (int)val(args[2]));
		} else if (!strcmp(op, "get")) {
			u32 got, want = val(args[2]);

			need(cur);
			got = (u32)klasy_flow_lookup(cur, obj(args[1]));
			if (got != want)
				fail("%s carries %#x, want %#x (%s)", args[1], got, want, args[2]);
		} else if (!strcmp(op, "take")) {
			u32 *v = var(args[2] ? args[2] : "", true);

			need(cur);
			*v = (u32)klasy_flow_lookup(cur, obj(args[1]));
			if (!*v)
				fail("%s carries no ID", args[1]);
		} else if (!strcmp(op, "idchain")) {
			struct klasy_flow_entry *e;
			u32 i, n, most = 0;

			need(cur);
			for (i = 0; i < 1U << cur->bits; i++) {
				n = 0;
				hlist_for_each_entry_rcu(e, &cur->ids[i].head, id_node)
					n++;
				most = n > most ? n : most;
			}
			if (most > val(args[1]))
				fail("an ID bucket holds %u entries, want at most %s", most, args[1]);
		} else if (!strcmp(op, "rm")) {
			need(cur);
			klasy_flow_remove(cur, obj(args[1]));
		} else if (!strcmp(op, "free")) {
			void *o = obj(args[1]);

			for (i = 0; i < nflows; i++)
				klasy_flow_forget(flows[i], o);
			memset(o, 0, OBJ_SIZE);
		} else if (!strcmp(op, "trunc")) {
			need(cur);
			klasy_flow_truncated(cur, (int)val(args[1]), val(args[2]));
		} else if (!strcmp(op, "truncs")) {
			u32 n = val(args[1]), k, ms = val(args[4]);
			u64 t0 = now_ns(), took;

			need(cur);
			for (k = 0; k < n; k++)
				klasy_flow_truncated(cur, (int)val(args[2]), val(args[3]));
			took = (now_ns() - t0) / 1000000;
			if (took > ms)
				fail("%u truncations took %" PRIu64 " ms, want at most %u", n, took, ms);
		} else if (!strcmp(op, "ids")) {
			u32 n = val(args[1]), k;

			for (k = 0; k < n; k++)
				klasy_flow_new_id();
		} else if (!strcmp(op, "idstats")) {
			struct klasy_flow_id_counts c;

			klasy_flow_read_ids(&c);
			for (i = 1; i < nargs; i++) {
				char *eq = strchr(args[i], '=');
				unsigned int got;

				if (!eq)
					fail("idstats: %s is not KEY=VAL", args[i]);
				*eq = '\0';
				if (!strcmp(args[i], "wraps"))
					got = c.wraps;
				else if (!strcmp(args[i], "skipped"))
					got = c.skipped;
				else if (!strcmp(args[i], "none"))
					got = c.none;
				else
					fail("idstats: no count %s", args[i]);
				if (got != val(eq + 1))
					fail("%s=%u, want %s", args[i], got, eq + 1);
			}
		} else if (!strcmp(op, "call")) {
			if (nargs < 2)
				fail("call: which advice?");
			call(args + 1, nargs - 1);
		} else if (!strcmp(op, "saw")) {
			if ((u32)last_saw != val(args[1]))
				fail("the advice saw %#x, want %#x (%s)", (u32)last_saw, val(args[1]), args[1]);
			if (klasy_user_flow != last_saw)
				fail("the advice's hit carries flow %#x, it saw %#x", (u32)klasy_user_flow, (u32)last_saw);
		} else if (!strcmp(op, "eq") || !strcmp(op, "ne")) {
			u32 a = val(args[1]), b = val(args[2]);

			if ((a == b) != !strcmp(op, "eq"))
				fail("%s %s: %#x, %#x", args[1], args[2], a, b);
		} else if (!strcmp(op, "stats")) {
			struct klasy_flow_counts c;

			need(cur);
			klasy_flow_read(cur, &c);
			for (i = 1; i < nargs; i++) {
				char *eq = strchr(args[i], '=');
				u64 got;

				if (!eq)
					fail("stats: %s is not KEY=VAL", args[i]);
				*eq = '\0';
				got = count(&c, args[i]);
				if (got != val(eq + 1))
					fail("%s=%" PRIu64 ", want %s", args[i], got, eq + 1);
			}
		} else if (!strcmp(op, "nmi")) {
			bool on = val(args[1]);

			if (on == klasy_user_in_nmi)
				fail("nmi %s: already so", args[1]);
			klasy_user_in_nmi = on;
			if (!on)
				klasy_user_irq_work_run();
		} else if (!strcmp(op, "pool")) {
			struct klasy_flow_pool *p;
			struct llist_node *n;
			u32 want = val(args[1]), got = 0;

			need(cur);
			p = this_cpu_ptr(cur->pool);
			for (n = p->free.first; n; n = n->next)
				got++;
			if (got != want || (u32)atomic_read(&p->n) != want)
				fail("pool holds %u entries and counts %d, want %u", got,
				     atomic_read(&p->n), want);
		} else if (!strcmp(op, "onlock")) {
			need(cur);
			onlock_reg = args[2] && !strcmp(args[2], "reg");
			if (!args[3] || (!onlock_reg && (!args[2] || strcmp(args[2], "rm"))) ||
			    (onlock_reg && !args[4]))
				fail("onlock N reg OBJ VAL | onlock N rm OBJ");
			onlock_obj = obj(args[3]);
			onlock_val = onlock_reg ? val(args[4]) : 0;
			onlock_flow = cur;
			onlock_left = (int)val(args[1]);
		} else if (!strcmp(op, "print")) {
			for (i = 0; i < nflows; i++)
				print_flow(flows[i]);
		} else {
			fail("unknown operation %s", op);
		}
		if (!klasy_user_in_nmi)
			klasy_user_irq_work_run();
		/* One thread: no lookup is running between two lines. */
		klasy_user_quiescent();
	}
	klasy_user_in_nmi = false;
	for (i = 0; i < nflows; i++) {
		klasy_flow_destroy(flows[i]);
		free(flows[i]);
	}
	klasy_user_quiescent();
	printf("ok %d lines\n", line_no);
	return 0;
}

/* ---- concurrent use ---- */

static pthread_barrier_t barrier;
static int stress_rounds;

#define PRIVATE 512
#define SHARED 64

struct stress_thread {
	pthread_t th;
	int t;
	u32 *ids;		/* every ID get_new_flowid gave this thread */
	size_t nids;
	u64 lookups;
	u64 dropped;		/* this thread's count, after its last operation */
	u64 nmi_ops;		/* operations in NMI */
	const char *err;
	u32 err_a, err_b;
};

static void *addr(int t, int i)
{
	/* Never dereferenced: the table only compares addresses. */
	return (void *)(uintptr_t)(0x10000000ULL + ((u64)t << 24) + (u64)i * OBJ_SIZE);
}

static void *shared(int k)
{
	return addr(0xff, k);
}

/*
 * In nmi mode, a thread's operations run in "NMI" (in_nmi() true), and it
 * leaves NMI every NMI_BURST operations, running the irq_works it queued,
 * as a CPU does between two NMIs.
 */
static bool stress_nmi;
#define NMI_BURST 16

static void nmi_begin(struct stress_thread *st)
{
	klasy_user_in_nmi = stress_nmi;
}

static void nmi_end(void)
{
	if (klasy_user_in_nmi) {
		klasy_user_in_nmi = false;
		klasy_user_irq_work_run();
	}
}

/*
 * After each operation: whether it was dropped (this thread's dropped
 * count grew), and leave NMI at the end of a burst.
 */
static bool stress_op(struct stress_thread *st)
{
	u64 d = READ_ONCE(per_cpu_ptr(stress_flow.stats, klasy_user_cpu())->dropped);
	bool dropped = d != st->dropped;

	st->dropped = d;
	if (klasy_user_in_nmi) {
		st->nmi_ops++;
		if (st->nmi_ops % NMI_BURST == 0) {
			nmi_end();
			nmi_begin(st);
		}
	} else {
		klasy_user_irq_work_run();
	}
	return dropped;
}

/*
 * Each thread: its own objects, registered, looked up and removed, and
 * shared objects, each operation in turn on each, from a different start
 * per thread. The shared objects' IDs of a round all fall in one bucket
 * of the ID index, so that threads contend for it. An operation dropped
 * (only in NMI: a lock another thread holds) changes nothing, and the
 * checks expect just that.
 */
static void *stress_run(void *arg)
{
	struct stress_thread *st = arg;
	struct klasy_flow *f = &stress_flow;
	u32 mine[PRIVATE], want[PRIVATE], got;
	int r, i, k;

#define CHECK(cond, what, a, b) do { \
	if (!(cond) && !st->err) { st->err = (what); st->err_a = (a); st->err_b = (b); } \
} while (0)

	for (r = 0; r < stress_rounds; r++) {
		nmi_begin(st);
		for (i = 0; i < PRIVATE; i++) {
			mine[i] = (u32)klasy_flow_new_id();
			st->ids[st->nids++] = mine[i];
			klasy_flow_register(f, addr(st->t, i), (int)mine[i]);
			want[i] = stress_op(st) ? 0 : mine[i];
		}
		for (i = 0; i < SHARED * 4; i++) {
			u32 id;

			k = (i + st->t * 7) % SHARED;
			id = (u32)(k + 1) << 20 | (u32)st->t << 12 | (u32)(r & 0xfff);
			switch ((i + i / SHARED + st->t) % 4) {
			case 0:
				klasy_flow_register(f, shared(k), (int)id);
				break;
			case 1:
				klasy_flow_forget(f, shared(k));
				break;
			case 2:
				klasy_flow_truncated(f, (int)id, 12);
				break;
			case 3:
				klasy_flow_remove(f, shared(k));
				break;
			}
			stress_op(st);
			got = (u32)klasy_flow_lookup(f, shared(k));
			st->lookups++;
			/* 0, or an ID some thread gave object k. */
			CHECK(!got || (got >> 20) == (u32)k + 1, "shared object carries another's ID", (u32)k, got);
		}
		for (i = 0; i < PRIVATE; i++) {
			got = (u32)klasy_flow_lookup(f, addr(st->t, i));
			st->lookups++;
			CHECK(got == want[i], "private object lost its ID", want[i], got);
			if (i & 1) {
				klasy_flow_remove(f, addr(st->t, i));
				if (!stress_op(st))
					want[i] = 0;
			}
		}
		for (i = 0; i < PRIVATE; i++) {
			got = (u32)klasy_flow_lookup(f, addr(st->t, i));
			st->lookups++;
			CHECK(got == want[i], "private object after removes", want[i], got);
		}
		nmi_end();
		pthread_barrier_wait(&barrier);
		if (st->t == 0)
			klasy_user_quiescent();
		pthread_barrier_wait(&barrier);
		/* Outside NMI: nothing is dropped, the table ends empty. */
		for (i = 0; i < PRIVATE; i++)
			klasy_flow_remove(f, addr(st->t, i));
	}
	return NULL;
}

static int cmp_u32(const void *a, const void *b)
{
	u32 x = *(const u32 *)a, y = *(const u32 *)b;

	return x < y ? -1 : x > y;
}

static int stress(int threads, int rounds, bool nmi)
{
	struct stress_thread *st = calloc(threads, sizeof(*st));
	struct klasy_flow_counts c;
	u64 lookups = 0, nmi_ops = 0;
	size_t nids = 0, i;
	u32 *all;
	int t, k, bad = 0;

	stress_rounds = rounds;
	stress_nmi = nmi;
	if (klasy_flow_init(&stress_flow, "stress", 12))
		die("no memory for the table");
	pthread_barrier_init(&barrier, NULL, threads);
	for (t = 0; t < threads; t++) {
		st[t].t = t;
		st[t].ids = malloc(sizeof(u32) * PRIVATE * rounds);
		pthread_create(&st[t].th, NULL, stress_run, &st[t]);
	}
	for (t = 0; t < threads; t++)
		pthread_join(st[t].th, NULL);
	for (k = 0; k < SHARED; k++)
		klasy_flow_remove(&stress_flow, shared(k));
	klasy_user_quiescent();

	all = malloc(sizeof(u32) * PRIVATE * rounds * threads);
	for (t = 0; t < threads; t++) {
		if (st[t].err) {
			printf("thread %d: %s: %#x, %#x\n", t, st[t].err, st[t].err_a, st[t].err_b);
			bad = 1;
		}
		lookups += st[t].lookups;
		memcpy(all + nids, st[t].ids, st[t].nids * sizeof(u32));
		nids += st[t].nids;
	}
	qsort(all, nids, sizeof(u32), cmp_u32);
	for (i = 0; i < nids; i++) {
		if (!all[i] || (i && all[i] == all[i - 1])) {
			printf("get_new_flowid gave %#x twice or zero\n", all[i]);
			bad = 1;
			break;
		}
	}
	klasy_flow_read(&stress_flow, &c);
	for (t = 0; t < threads; t++)
		nmi_ops += st[t].nmi_ops;
	/*
	 * Outside NMI nothing is dropped. In NMI an operation is dropped when
	 * another thread holds its lock all KLASY_FLOW_NMI_TRIES tries (the
	 * pool never runs dry here): a few, not most.
	 */
	if (nmi ? c.sum.dropped * 10 > nmi_ops || !nmi_ops : c.sum.dropped > 0) {
		printf("dropped=%" PRIu64 " of %" PRIu64 " operations in NMI\n", c.sum.dropped, nmi_ops);
		bad = 1;
	}
	if (c.entries || c.sum.evictions || c.sum.hits + c.sum.misses != lookups) {
		printf("at the end: entries=%" PRIu64 " evictions=%" PRIu64
		       " hits+misses=%" PRIu64 ", want 0 0 %" PRIu64 "\n", c.entries,
		       c.sum.evictions, c.sum.hits + c.sum.misses, lookups);
		bad = 1;
	}
	printf("threads=%d rounds=%d nmi=%d ids=%zu lookups=%" PRIu64 " hits=%" PRIu64 " freed=%" PRIu64
	       " ambiguous=%" PRIu64 " nmi_ops=%" PRIu64 " dropped=%" PRIu64 "\n", threads, rounds, nmi,
	       nids, lookups, c.sum.hits, c.sum.freed, c.sum.ambiguous, nmi_ops, c.sum.dropped);
	klasy_flow_destroy(&stress_flow);
	klasy_user_quiescent();
	return bad;
}

/* ---- ns per operation (Table 6.7) ---- */

enum { NEW_ID, GET_EMPTY, REG_CHANGE, GET_CHANGE, RM_CHANGE, REG_SAME, GET_SAME, RM_SAME, NROWS };

static const char *const row_names[NROWS] = {
	"get_new_flowid", "(empty) get_flowid",
	"(changeID) register_flowid", "(changeID) get_flowid", "(changeID) remove_flowid",
	"(sameID) register_flowid", "(sameID) get_flowid", "(sameID) remove_flowid",
};

static int bench_ops, bench_reps;
static double *samples[NROWS];	/* [rep * threads + t] ns per operation */
static int bench_threads;
static volatile u32 sink;

/*
 * The threads start each timed run together: a barrier that spins, as a
 * sleeping one would wake the second thread after the first is done.
 */
static int spin_count, spin_gen;

static void spin_barrier(void)
{
	int gen = __atomic_load_n(&spin_gen, __ATOMIC_ACQUIRE);

	if (__atomic_add_fetch(&spin_count, 1, __ATOMIC_ACQ_REL) == bench_threads) {
		__atomic_store_n(&spin_count, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&spin_gen, gen + 1, __ATOMIC_RELEASE);
		return;
	}
	while (__atomic_load_n(&spin_gen, __ATOMIC_ACQUIRE) == gen)
		__builtin_ia32_pause();
}

static u64 now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (u64)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void *bench_run(void *arg)
{
	int t = (int)(intptr_t)arg, r, i, row;
	struct klasy_flow *f = &bench_flow;
	u32 acc = 0;
	u64 t0;

	/* Rep 0 warms up (page faults, caches) and is not counted. */
	for (r = -1; r < bench_reps; r++) {
		for (row = 0; row < NROWS; row++) {
			bool same = row >= REG_SAME;

			spin_barrier();
			t0 = now_ns();
			switch (row) {
			case NEW_ID:
				for (i = 0; i < bench_ops; i++)
					acc += (u32)klasy_flow_new_id();
				break;
			case GET_EMPTY:
				for (i = 0; i < bench_ops; i++)
					acc += (u32)klasy_flow_lookup(f, addr(t, i));
				break;
			case REG_CHANGE:
			case REG_SAME:
				for (i = 0; i < bench_ops; i++) {
					klasy_flow_register(f, addr(t, i), same ? 1 + t : 1 + i + t * bench_ops);
					klasy_user_irq_work_run();	/* the pool's refill */
				}
				break;
			case GET_CHANGE:
			case GET_SAME:
				for (i = 0; i < bench_ops; i++)
					acc += (u32)klasy_flow_lookup(f, addr(t, i));
				break;
			case RM_CHANGE:
			case RM_SAME:
				for (i = 0; i < bench_ops; i++)
					klasy_flow_remove(f, addr(t, i));
				break;
			}
			if (r >= 0)
				samples[row][r * bench_threads + t] = (double)(now_ns() - t0) / bench_ops;
			if (row == RM_CHANGE || row == RM_SAME) {
				spin_barrier();
				if (t == 0)
					klasy_user_quiescent();
			}
		}
	}
	sink = acc;
	return NULL;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int bench(int threads, int ops, int reps)
{
	pthread_t th[64];
	int t, row, i, n = reps * threads;

	bench_threads = threads;
	bench_ops = ops;
	bench_reps = reps;
	if (threads < 1 || threads > 64 || ops < 1 || reps < 1)
		die("bench: bad arguments");
	if (klasy_flow_init(&bench_flow, "bench", KLASY_FLOW_BITS_DEFAULT))
		die("no memory for the table");
	for (row = 0; row < NROWS; row++)
		samples[row] = calloc(n, sizeof(double));
	for (t = 0; t < threads; t++)
		pthread_create(&th[t], NULL, bench_run, (void *)(intptr_t)t);
	for (t = 0; t < threads; t++)
		pthread_join(th[t], NULL);
	klasy_user_quiescent();
	/* row NAME<TAB>median<TAB>mean<TAB>sd, ns per operation */
	for (row = 0; row < NROWS; row++) {
		double sum = 0, sq = 0, mean, *x = samples[row];

		for (i = 0; i < n; i++)
			sum += x[i];
		mean = sum / n;
		for (i = 0; i < n; i++)
			sq += (x[i] - mean) * (x[i] - mean);
		qsort(x, n, sizeof(double), cmp_double);
		printf("row %s\t%.2f\t%.2f\t%.2f\n", row_names[row],
		       n & 1 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2, mean,
		       n > 1 ? sqrt(sq / (n - 1)) : 0.0);
	}
	klasy_flow_destroy(&bench_flow);
	klasy_user_quiescent();
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "script"))
		return script();
	if ((argc == 4 || (argc == 5 && !strcmp(argv[4], "nmi"))) && !strcmp(argv[1], "stress"))
		return stress(atoi(argv[2]), atoi(argv[3]), argc == 5);
	if (argc == 5 && !strcmp(argv[1], "bench"))
		return bench(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]));
	fprintf(stderr, "usage: harness script < SCRIPT | stress THREADS ROUNDS [nmi] | bench THREADS OPS REPS\n");
	return 2;
}
