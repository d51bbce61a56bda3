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
