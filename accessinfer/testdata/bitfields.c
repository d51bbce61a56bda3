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
