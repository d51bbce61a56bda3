/* Nested levels: an access below an embedded struct member, where the
 * source reached the bytes through the outer member but names another
 * struct's member there (a cast), or not. Expectations as in basic.c:
 * "want:" lists the accesses a line must have, lines without one expect
 * none. Built as copies.c is (TestFixtures). */
#define noinline __attribute__((noinline))

struct cmd_data {
	void *file;
	unsigned char data[56]; /* each command's own struct, cast */
};

struct req {
	int flags;
	int opcode;
	struct cmd_data cmd;
};

struct open_cmd {
	void *file;
	long dfd;
	long how;
};

/* io_uring's io_kiocb_to_cmd(): the command's struct over cmd's bytes. */
#define req_to_cmd(r, type) ((type *)&(r)->cmd)

noinline long open_args(struct req *req)
{
	return req_to_cmd(req, struct open_cmd)->dfd /* want-any: req.cmd:load */
	       + req_to_cmd(req, struct open_cmd)->how; /* want-any: req.cmd:load */
}

/* Reading one element of the array is an access of it. */
noinline int cmd_byte(struct req *req, int i)
{
	return req->cmd.data[3]; /* want: req.cmd:load cmd_data.data:load */
}

/* A class hierarchy, each struct embedding the next at offset 0 (sock,
 * inet_connection_sock, tcp_sock), and the casts between its pointers. */
void consume(void *p);

struct base {
	int state;
	int flags;
	int refs;
	union {
		long val;
		void *ptr;
	};
};

struct mid {
	struct base b;
	int ack;
	int rto;
	int pending;
};

struct top {
	struct mid m;
	int snd;
	int rcv;
};

static inline struct mid *to_mid(struct base *b)
{
	return (struct mid *)b;
}

/* sk and tp are one register: the source casts sk (inet_csk(sk)->...),
 * so which struct of the hierarchy it names is not told; the member
 * below it is. */
noinline int cast_sibling(struct base *sk)
{
	struct top *tp = (struct top *)sk;

	consume(tp);
	return to_mid(sk)->rto /* want: mid.rto:load */
	       + tp->rcv; /* want: top.rcv:load */
}

/* The same on an anonymous union of the innermost struct: sk's typing
 * decides no member there, tp's only mid.b, which names the cast's
 * struct, not told either (sk->val would be the same code). */
noinline long cast_union(struct base *sk)
{
	struct top *tp = (struct top *)sk;

	consume(tp);
	return to_mid(sk)->b.val + tp->rcv; /* want: top.rcv:load */
}

/* memcpy() into an embedded member: GCC stores the first word through
 * the object's register and the rest through a register set to the
 * member by a lea. The member is copied whole: the plugin records its
 * address (memcpy's argument), nothing inside it. */
struct addr_storage {
	unsigned short family;
	char data[126];
};

struct amsg {
	long flags;
	void *iov;
	struct addr_storage addr;
};

static struct amsg the_amsg;

__attribute__((noipa)) struct amsg *get_amsg(void)
{
	return &the_amsg;
}

noinline int save_addr(void)
{
	struct addr_storage st;
	struct amsg *io;

	consume(&st);
	io = get_amsg();
	if (!io)
		return -1;
	__builtin_memcpy(&io->addr, &st, sizeof(io->addr)); /* want-any: amsg.addr:store amsg.addr:lea */
	return 0;
}

/* A struct copied from a global template (futexv[i].q = futex_q_init):
 * the moves read the global at RIP-relative addresses. The source names
 * no member of the template; the plugin records the member assigned. */
struct span {
	long lo;
	long hi;
};

struct tmpl {
	long a;
	struct span in;
	long z;
};

struct holder {
	int x;
	struct tmpl t;
};

struct tmpl tmpl_init = { 1, { 2, 3 }, 4 };

noinline void init_holder(struct holder *h)
{
	h->t = tmpl_init; /* want: holder.t:store */
}

/* A pointer loaded from a global pointer variable (the kernel's current,
 * current_task's value): the source may cast it to its first member's
 * type (current_thread_info() is (struct thread_info *)current), which
 * compiles as task_thread_info(current)'s &current->thread_info does.
 * The offset-0 level is not decided, the member below it is. */
struct thr_info {
	unsigned long flags;
	unsigned int status;
};

struct task {
	struct thr_info thread_info;
	unsigned int state;
	void *stack;
};

struct task *cur_task;

#define cur_thread_info() ((struct thr_info *)cur_task)

noinline unsigned int thread_status(void)
{
	return cur_thread_info()->status; /* want: thr_info.status:load */
}

noinline unsigned int task_state(void)
{
	return cur_task->state; /* want: task.state:load */
}

/* A static function whose pointer parameter is the same global's member
 * at every call (tk_setup_internals(&tk_core.timekeeper, ..)): GCC
 * propagates the constant, the parameter's location is the address
 * and the code reads the global at RIP-relative addresses. The source
 * names the member through the parameter (tk->shift), so the plugin
 * records no level of the global above it; tk_core.timekeeper.shift
 * would be the same code. */
struct read_base {
	long cycle_last;
	long shift;
};

struct tk_core_t {
	long seq;
	struct read_base tkr;
};

struct tk_core_t tk_core_g;

static noinline void setup_base(struct read_base *tkr, long shift)
{
	tkr->shift = shift; /* want: read_base.shift:store */
}

noinline void setup_all(long s)
{
	setup_base(&tk_core_g.tkr, s);
	setup_base(&tk_core_g.tkr, s + 1);
}

/* A class two levels below the struct at offset 0 (tcp_sock holds
 * inet_connection_sock, which holds inet_sock, which holds sock): with a
 * pointer to the base in the function, the source casts it to the
 * middle class (inet_csk(sk)->icsk_rto where tp = tcp_sk(sk)), the same
 * code as tp->inet_conn.icsk_rto: the outer level is not decided. */
struct top2 {
	struct top t;
	int a;
	int b;
};

/* inet_csk(sk) as a macro: no inlined copy gives the register a type. */
#define to_top(p) ((struct top *)(p))

noinline int cast_deep(struct top2 *t2, struct base *sk, int n)
{
	consume(sk);
	return t2->a * n /* want: top2.a:load */
	       + to_top(t2)->snd; /* want: top.snd:load */
}

/* A variable of an inner scope and one of the function in the same
 * register, of different types: va = rb_entry(n, ..) in the loop's
 * block, n the function's. n->left and va->node.left are the same
 * code: both typings count, and they agree only on the inner member. */
struct rbn {
	struct rbn *left;
	struct rbn *right;
	long color;
};

struct varea {
	long start;
	long end;
	struct rbn node;
	long extra;
};

#define rb_entry_of(p, type, member) \
	((type *)((char *)(p) - __builtin_offsetof(type, member)))

noinline struct varea *find_varea(struct rbn *n, long addr)
{
	while (n) {
		struct varea *va = rb_entry_of(n, struct varea, node);

		if (addr < va->start) /* want-any: varea.start:load */
			n = n->left; /* want: rbn.left:load */
		else if (addr >= va->end) /* want-any: varea.end:load */
			n = n->right; /* want: rbn.right:load */
		else
			return va;
	}
	return 0;
}
