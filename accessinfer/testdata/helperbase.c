/* file_start_write's S_ISREG(file_inode(file)->i_mode) in vfs_write:
 * the scheduler moves fl_ino's load of f->inode up among the
 * instructions of the line before (count = 100), where its own row is
 * lost. The klasy plugin records f->inode in fl_ino, at fl_ino's line,
 * and ino.mode through the base expression "fl_ino(f)" at start_write's
 * line, which has a row in the load's block. */
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
};

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
