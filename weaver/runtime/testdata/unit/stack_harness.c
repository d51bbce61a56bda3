// SPDX-License-Identifier: GPL-2.0
/*
 * stack_harness - klasy_stack.c's table of stacks (STACK_ID), taken out
 * of the source by unit_test.go into stack_types.c and stack_funcs.c,
 * with the unwinder and the hash as the script says:
 *
 *   stack_harness < SCRIPT
 *
 * Script lines (# starts a comment):
 *
 *   save ID HEX,HEX...  the probed context's stack is these frames and
 *                       they hash to ID: STACK_ID() must return ID
 *   slots ID N          the table holds ID in N slots
 *   frames ID HEX,...   the slot holding ID has these frames
 *   table KEY=VAL...    check the counts (used full collisions)
 *
 * A failed check prints "line N: ..." and exits 1.
 */
#include <inttypes.h>
#include <stdarg.h>

#include "kern_user.h"
#include "script.h"

typedef struct {
	int counter;
} atomic_t;
typedef struct {
	long counter;
} atomic_long_t;
#define atomic_inc(v) ((v)->counter++)
#define atomic_read(v) ((v)->counter)
#define atomic_long_inc(v) ((v)->counter++)
#define atomic_long_read(v) ((v)->counter)

#include "stack_types.c"

/* The hit of the handler running, and the frames being hashed. */
static struct klasy_hit klasy_hit;
static unsigned long klasy_stack_scratch[KLASY_STACK_DEPTH];

/* The unwinder: the script's frames. */
static unsigned long script_ip[KLASY_STACK_DEPTH];
static unsigned int script_nr;

static unsigned int klasy_stack_walk(struct pt_regs *regs, unsigned long *ip)
{
	memcpy(ip, script_ip, script_nr * sizeof(*ip));
	return script_nr;
}

/* The hash: klasy_stack_id takes an id's halves from two seeds. */
static u64 script_id;
#define jhash2(k, n, seed) ((void)(k), (void)(n), (seed) == 0x6b6c6173 ? (u32)(script_id >> 32) : (u32)script_id)

#include "stack_funcs.c"
#include "stack_have.h"

static unsigned int parse_frames(char *s, unsigned long *ip)
{
	unsigned int n = 0;
	char *tok;

	for (tok = strtok(s, ","); tok && n < KLASY_STACK_DEPTH; tok = strtok(NULL, ","))
		ip[n++] = strtoul(tok, NULL, 16);
	return n;
}

static struct klasy_stack *slot_of(u64 id, unsigned int *count)
{
	struct klasy_stack *found = NULL;
	unsigned int i;

	*count = 0;
	for (i = 0; i < KLASY_STACKS; i++)
		if (klasy_stacks[i].id == id) {
			found = &klasy_stacks[i];
			(*count)++;
		}
	return found;
}

int main(void)
{
	char line[512], op[32], a[512], b[512];
	unsigned int count;
	u64 id;

	klasy_stacks = calloc(KLASY_STACKS, sizeof(*klasy_stacks));
	while (fgets(line, sizeof(line), stdin)) {
		char *hash = strchr(line, '#');
		int n;

		line_no++;
		if (hash)
			*hash = 0;
		n = sscanf(line, "%31s %511s %511s", op, a, b);
		if (n <= 0)
			continue;
		if (!strcmp(op, "save") && n == 3) {
			id = strtoull(a, NULL, 0);
			script_id = id;
			script_nr = parse_frames(b, script_ip);
			if (klasy_stack_id() != id)
				fail("STACK_ID() is not %#" PRIx64, id);
		} else if (!strcmp(op, "slots") && n == 3) {
			slot_of(strtoull(a, NULL, 0), &count);
			if (count != strtoul(b, NULL, 0))
				fail("%s is in %u slots, want %s", a, count, b);
		} else if (!strcmp(op, "frames") && n == 3) {
			unsigned long ip[KLASY_STACK_DEPTH];
			unsigned int nr = parse_frames(b, ip);
			struct klasy_stack *s = slot_of(strtoull(a, NULL, 0), &count);

			if (!s || s->nr != nr || memcmp(s->ip, ip, nr * sizeof(*ip)))
				fail("%s does not hold the frames %s", a, b);
		} else if (!strcmp(op, "table") && n >= 2) {
			char *kv, *rest = line + strlen("table");

			for (kv = strtok(rest, " \t\n"); kv; kv = strtok(NULL, " \t\n")) {
				long want, got;
				char key[32];

				if (sscanf(kv, "%31[^=]=%ld", key, &want) != 2)
					fail("bad check %s", kv);
				if (!strcmp(key, "used"))
					got = atomic_read(&klasy_stacks_used);
				else if (!strcmp(key, "full"))
					got = atomic_long_read(&klasy_stacks_full);
				else if (!strcmp(key, "collisions"))
					got = STACK_COLLISIONS;
				else
					fail("unknown count %s", key);
				if (got != want)
					fail("%s=%ld, want %ld", key, got, want);
			}
		} else {
			fail("unknown operation %s", op);
		}
	}
	printf("ok %d lines\n", line_no);
	return 0;
}
