/* A bitfield tested against zero whose test GCC turns into arithmetic
 * on the loaded unit (!!p->ready: shift and mask, no compare): the
 * klasy plugin does not record the test (a BIT_FIELD_REF, as for
 * if (p->ready)), and the instruction is no test either. */
#define noinline __attribute__((noinline))

struct bv {
	unsigned int mode:4;
	unsigned int ready:1;
	unsigned int busy:1;
	int count;
};

noinline int bv_ready(const struct bv *p)
{
	return !!p->ready; /* want: bv.ready:load */
}

noinline int bv_count(const struct bv *p)
{
	return p->count; /* want: bv.count:load */
}
