/* One-member wrappers of byte arrays (guid_t, in6_addr) read through a
 * cast or an inlined memcmp: wider loads than the array's elements,
 * where the source names no member of the wrapper and the plugin
 * records none. Lines without "want:" expect no access. Built as the
 * kernel is (TestFixtures). */
#include <string.h>

#define noinline __attribute__((noinline))

typedef struct {
	unsigned char b[16];
} guid_t;

struct in6_addr {
	union {
		unsigned char u6_addr8[16];
		unsigned short u6_addr16[8];
		unsigned int u6_addr32[4];
	} in6_u;
};

static inline unsigned int addr_hash(const struct in6_addr *a)
{
	const unsigned long *ul = (const unsigned long *)a;
	unsigned long x = ul[0] ^ ul[1];

	return (unsigned int)(x ^ (x >> 32));
}

noinline unsigned int hash_addr(const struct in6_addr *a)
{
	return addr_hash(a);
}

noinline int guid_same(const guid_t *u1, const guid_t *u2)
{
	return memcmp(u1, u2, sizeof(guid_t)) == 0;
}

noinline unsigned int addr_word(const struct in6_addr *a)
{
	return a->in6_u.u6_addr32[2]; /* want: in6_addr.in6_u:load */
}

noinline unsigned char guid_byte(const guid_t *g)
{
	return g->b[6]; /* want: guid_t.b:load */
}

/* One-member wrappers of a scalar read or written whole: the source
 * either names the member (v->counter in a helper taking atomic_t *)
 * or moves the value (pgd_bits(*pgdp), *uidp = uid), and the
 * instructions are the same. Only an inlined helper taking the wrapper
 * says the member is named, not where one taking it by value is inlined
 * too (the load is its argument's); a wrapper with no name can be
 * nothing but its member (get_unaligned's __pptr->x). */
typedef struct {
	unsigned long pgd;
} pgd_t;

typedef struct {
	unsigned int val;
} kuid_t;

typedef struct {
	int counter;
} atomic_t;

static noinline unsigned long pgd_bits(pgd_t pgd)
{
	return pgd.pgd & 0xfff;
}

noinline unsigned long pgd_walk(pgd_t *pgdp)
{
	return pgd_bits(*pgdp);
}

noinline void uid_put(kuid_t *uidp, kuid_t uid)
{
	*uidp = uid;
}

static inline unsigned long pgd_pfn(pgd_t pgd)
{
	return pgd.pgd >> 12;
}

static inline unsigned long pgd_next(pgd_t *pgd)
{
	return pgd_pfn(*pgd) * 3;
}

noinline unsigned long pgd_walk_next(pgd_t *pgdp)
{
	return pgd_next(pgdp);
}

static inline int atomic_get(const atomic_t *v)
{
	return *(const volatile int *)&v->counter; /* want: atomic_t.counter:load */
}

noinline int atomic_peek(atomic_t *v)
{
	return atomic_get(v); /* want: atomic_t.counter:load */
}

noinline unsigned int unaligned_u32(const void *p)
{
	const struct { unsigned int x; } __attribute__((packed)) *pp = p;

	return pp->x; /* want: .x:load */
}
