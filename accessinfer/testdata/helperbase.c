/* file_start_write's S_ISREG(file_inode(file)->i_mode) in vfs_write:
 * the scheduler moves fl_ino's load of f->inode up among the
 * instructions of the line before (count = 100), where its own row is
 * lost. The klasy plugin records f->inode in fl_ino, at fl_ino's line,
 * and ino.mode through the base expression "fl_ino(f)" at start_write's
 * line, which has a row in the load's block. The same holds for a
 * helper taking a member's address, used at the caller's line (fl_cb). */
#define noinline __attribute__((noinline))

void consume(void *p);

struct ino {
	unsigned short mode;
	void *sb;
};

struct fl2 {
	long pad[4];
	struct ino *inode;
	void *priv;
	unsigned int mode;
	char cb[16];
};

/* A control block cast from a byte array (qdisc_skb_cb(skb)). */
struct cbx {
	int a;
	int b;
};

static inline struct cbx *fl_cb(struct fl2 *f)
{
	return (struct cbx *)f->cb;
}

/* The plugin records cbx.b through "fl_cb(f)" here, fl2.cb's address
 * in fl_cb, whose line has no code. */
noinline void fl_setcb(struct fl2 *f, int v)
{
	fl_cb(f)->b = v; /* want: fl2.cb:store */
}

static inline struct ino *fl_ino(const struct fl2 *f)
{
	return f->inode;
}

static inline void start_write(struct fl2 *f)
{
	if ((fl_ino(f)->mode & 0xf000) != 0x8000)
		return;
	consume(fl_ino(f)->sb);
}

static int verify(struct fl2 *f, unsigned long count)
{
	__asm__ volatile("" ::"r"(f), "r"(count) : "memory");
	return 0;
}

noinline long fl_write(struct fl2 *f, unsigned long count)
{
	long ret;

	if (!(f->mode & 2))
		return -22;
	ret = verify(f, count);
	if (ret)
		return ret;
	if (count > 100)
		count = 100; /* want: fl2.inode:load */
	start_write(f);
	consume(f->priv);
	return count;
}
