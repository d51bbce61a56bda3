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
