/* Kernel-like accesses for accessinfer's tests. A line's expected
 * accesses follow "want:" as struct.member:kind (kind load, store, rmw,
 * lea); "want-any:" lists accesses the line may have without needing
 * them (the compiler may fold them away). */
#include <stddef.h>

#define noinline __attribute__((noinline))
#define container_of(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))
#define READ_ONCE(x) (*(volatile __typeof__(x) *)&(x))
#define WRITE_ONCE(x, v) (*(volatile __typeof__(x) *)&(x) = (v))

typedef struct refcount_struct {
	int refs;
} refcount_t;

struct list_head {
	struct list_head *next, *prev;
};

struct dev {
	int ifindex;
	unsigned int mtu;
	char name[16];
};

struct sock {
	int sk_state;
	unsigned int sk_rcvbuf;
	struct list_head sk_node;
	struct dev *sk_dev;
};

struct skb {
	struct skb *next;
	union {
		struct dev *dev;
		unsigned long dev_scratch;
	};
	struct sock *sk;
	unsigned int len, data_len;
	unsigned char cloned : 1, nohdr : 1, peeked : 1, pkt_type : 3;
	unsigned short protocol;
	struct list_head list;
	refcount_t users;
	char cb[48];
};

struct counters {
	long rx, tx;
	int drops;
};

struct counters global_counters;
struct counters cpu_counters[8];

noinline int skb_len(struct skb *skb)
{
	return skb->len; /* want: skb.len:load */
}

noinline void skb_set_len(struct skb *skb, unsigned int n)
{
	skb->len = n; /* want: skb.len:store */
}

noinline void skb_add_len(struct skb *skb, unsigned int n)
{
	skb->len += n; /* want: skb.len:rmw */
}

noinline unsigned int *skb_len_ptr(struct skb *skb)
{
	return &skb->data_len; /* want: skb.data_len:lea */
}

noinline int skb_dev_mtu(struct skb *skb)
{
	return skb->sk->sk_dev->mtu; /* want: skb.sk:load sock.sk_dev:load dev.mtu:load */
}

noinline int skb_cloned(struct skb *skb)
{
	return skb->cloned; /* want: skb.cloned:load */
}

noinline int skb_pkt_type(struct skb *skb)
{
	return skb->pkt_type; /* want: skb.pkt_type:load */
}

noinline void skb_set_peeked(struct skb *skb)
{
	skb->peeked = 1; /* want: skb.peeked:rmw */
}

noinline void skb_clear_nohdr(struct skb *skb)
{
	skb->nohdr = 0; /* want: skb.nohdr:rmw */
}

noinline struct sock *sk_from_node(struct list_head *node)
{
	struct sock *sk = container_of(node, struct sock, sk_node);

	return sk->sk_rcvbuf > 10 ? sk : NULL; /* want: sock.sk_rcvbuf:load */
}

noinline int node_state(struct list_head *node)
{
	/* No variable has the container's type: undecided. */
	return container_of(node, struct sock, sk_node)->sk_state; /* want-any: sock.sk_state:load */
}

noinline int skb_users(struct skb *skb)
{
	/* The whole of a one-member wrapper read outside a helper taking
	 * it looks like a copy of it (uid = cred->uid): its member is not
	 * decided. */
	return READ_ONCE(skb->users.refs); /* want: skb.users:load */ /* want-any: refcount_struct.refs:load */
}

noinline long global_rx(void)
{
	return global_counters.rx; /* want: counters.rx:load */
}

noinline void global_drop(void)
{
	global_counters.drops++; /* want: counters.drops:rmw */
}

noinline long cpu_tx(int cpu)
{
	return cpu_counters[cpu].tx; /* want: counters.tx:load */
}

static inline unsigned int skb_headlen(const struct skb *skb)
{
	return skb->len - skb->data_len; /* want: skb.len:load skb.data_len:load */
}

noinline unsigned int use_headlen(struct skb *skb)
{
	return skb_headlen(skb) + 1;
}

extern void consume(void *p);
extern struct skb *get_skb(void);

noinline int spilled(struct skb *skb)
{
	int a = skb->len; /* want: skb.len:load */

	consume(NULL);
	consume(NULL);
	return a + skb->data_len; /* want: skb.data_len:load */
}

noinline int from_call(void)
{
	struct skb *skb = get_skb();

	return skb->protocol; /* want: skb.protocol:load */
}

noinline int dev_of(struct skb *skb)
{
	struct dev *d = skb->dev; /* want: skb.dev:load */

	return d->ifindex; /* want: dev.ifindex:load */
}

noinline void walk_list(struct list_head *head)
{
	struct list_head *p;

	for (p = head->next; p != head; p = p->next) /* want: list_head.next:load */
		consume(p);
}

noinline char skb_cb(struct skb *skb, int i)
{
	return skb->cb[i]; /* want: skb.cb:load */
}

noinline void skb_init(struct skb *skb)
{
	/* One 8-byte store of 0 over both: an inlined memset looks the
	 * same, and the plugin records no member for it: undecided. */
	skb->len = 0; /* want-any: skb.len:store */
	skb->data_len = 0; /* want-any: skb.data_len:store */
}

noinline int stack_struct(int x)
{
	/* The plugin records no initializer; inference sees a store. */
	struct counters c = { .rx = x }; /* want-any: counters.rx:store */

	consume(&c);
	return c.drops; /* want: counters.drops:load */
}
