/* IPA-SRA: a static function that uses a pointer parameter only to
 * read one member unconditionally gets a clone (fl_work.isra.0) taking
 * the member's value, and its callers load the member before the call.
 * The klasy plugin records the read in fl_work, through its parameter,
 * at fl_work's line: the load in fl_work0 has no record at its line
 * nor in its function (TestPluginMissesISRA). */
#define noinline __attribute__((noinline))

void consume(void *p);

struct fl {
	long pad[4];
	void *inode;
	void *priv;
};

static noinline long fl_work(int which, struct fl *f, long n)
{
	long i, s = (long)f->inode;

	for (i = 0; i < n; i++)
		s += s * i + which;
	consume((void *)s);
	return s;
}

noinline long fl_work0(struct fl *f, long n)
{
	return fl_work(0, f, n); /* want: fl.inode:load */
}

noinline long fl_work1(struct fl *f, long n)
{
	return fl_work(1, f, n); /* want: fl.inode:load */
}

noinline void *fl_priv(struct fl *f)
{
	return f->priv; /* want: fl.priv:load */
}
