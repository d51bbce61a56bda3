/* Bitfield tests against constants, which GCC's front end folds into a
 * BIT_FIELD_REF: the klasy plugin records no member for them, inference
 * does (Access.BitTest when the machine code tests the bits; a test
 * compiled into the value's extraction, as if (p->x) return 1; may be,
 * looks like a read). A bitfield read as a value is recorded by both. */
#define noinline __attribute__((noinline))

struct flags {
	int a;
	unsigned x : 1, y : 1, z : 3;
	int b;
};

void consume(void *p);

noinline int flag_x(struct flags *p)
{
	if (p->x) /* want: flags.x:load */
		consume(p);
	return 0;
}

noinline int flag_y(struct flags *p)
{
	return p->y && p->b; /* want: flags.y:load flags.b:load */
}

noinline int flag_z(struct flags *p)
{
	return p->z; /* want: flags.z:load */
}

noinline int flag_z3(struct flags *p)
{
	return p->z == 3; /* want: flags.z:load */
}

/* A bitfield set from a value: GCC clears its bits in the loaded unit
 * (and), ors the new bits in from another register and stores the unit
 * back. The bits the and keeps (x, y) are not read. */
noinline void set_z(struct flags *p, unsigned v)
{
	p->z = v; /* want: flags.z:store */ /* want-any: flags.z:load */
}

/* The same in a global, addressed %rip-relative: the load and the store
 * of the unit have different displacements for the same address. */
struct flags gflags;

noinline void set_global_z(unsigned v)
{
	gflags.z = v; /* want: flags.z:store */ /* want-any: flags.z:load */
}

/* The merged unit copied to another register to test it before the
 * store, fifteen instructions after the load (genphy_update_link's
 * phydev->link = ..): the load is part of the writes of x and y, not a
 * read of the bits the and keeps. */
noinline void set_xy(struct flags *p, int s)
{
	p->x = s; /* want-any: flags.x:load flags.y:load flags.x:store flags.y:store */
	p->y = s >> 3; /* want-any: flags.x:load flags.y:load flags.x:store flags.y:store */
	if (p->z == 1 && !p->y)
		p->x = 0; /* want-any: flags.x:load flags.y:load flags.x:store flags.y:store */
}

int pick(int v);

/* A bitfield written with a value spilled to the frame: the new bits are
 * or-ed in from memory (or 0x3(%rsp),%al). The load of the unit is the
 * write's, not a read of the bits it keeps (y, z). */
noinline void set_x_late(struct flags *p, int v, int w, int u, int t)
{
	_Bool on = pick(v) > w;
	int a = pick(u), b = pick(t), c = pick(a + b), d = pick(c ^ a);
	int e = pick(d + b), f = pick(e + c), g = pick(f), h = pick(g);

	p->b = a + b + c + d + e + f + g + h; /* want: flags.b:store */
	p->a = a * b * c * d * e * f * g * h; /* want: flags.a:store */
	p->x = on; /* want: flags.x:store */ /* want-any: flags.x:load */
}

/* Bitfields set, then memset of the array after them
 * (skb_complete_wifi_ack): the unit is stored back through the base
 * register moved on to the array (lea 0x40(%rdi),%rdi), not read. */
struct ack {
	long head[6];
	unsigned char u : 2, valid : 1, acked : 1, w : 4;
	long area[11];
};

noinline void set_ack(struct ack *p, _Bool acked)
{
	/* One store for both, at either line. */
	p->valid = 1; /* want-any: ack.valid:load ack.acked:load ack.valid:store ack.acked:store */
	p->acked = acked; /* want-any: ack.valid:load ack.acked:load ack.valid:store ack.acked:store */
	__builtin_memset(p->area, 0, sizeof(p->area)); /* want-any: ack.area:lea ack.area:store */
}

/* A bitfield set to one of two constants on a branch taken after the
 * and (eth_skb_pkt_type): the store back is in the next block. */
noinline void set_branch(struct flags *p, long v, long w)
{
	if (__builtin_expect(v != 0, 0)) {
		if ((v ^ w) & 1)
			p->z = 1; /* want: flags.z:store */ /* want-any: flags.z:load */
		else
			p->z = 2; /* want-any: flags.z:store flags.z:load */ /* not followed: the taken branch */
	}
	consume(p);
}
