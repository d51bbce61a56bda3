// SPDX-License-Identifier: GPL-2.0
/*
 * Test input for dwtype: compiled at test time with -g (DWARF 5, 4 and
 * 2), then run. The test reads the types of the v_* variables and the
 * layout of struct layout from the debug info, and compares them with
 * what gcc itself says: this program prints sizeof of each variable and
 * offsetof of each member that is not a bitfield.
 */
#include <stddef.h>
#include <stdio.h>

typedef unsigned int u32;
struct sock;
struct node { struct node *next; long key; };
union value { long l; double d; };
enum color { RED, GREEN };
typedef struct { int locked; } lock_t;

struct layout {
	u32 len;
	union {
		unsigned long addr;
		struct {
			unsigned short port;
			unsigned short proto;
		};
	};
	unsigned char flag_a : 1;
	unsigned char flag_b : 3;
	unsigned int wide : 20;
	unsigned char kind;
	int data[4];
	lock_t lock;
	void (*done)(struct layout *);
	char tail[];
};

int v_int;
const char *v_string;
char *const v_const_ptr = 0;
struct node *v_node;
struct sock *v_sock;
union value v_union;
enum color v_enum;
u32 v_u32[4];
int v_matrix[2][3];
char (*v_ptr_array)[8];
void (*v_fn)(int, const char *);
int (*v_fn_ret_ptr)(void);
int (*v_fn_variadic)(const char *, ...);
volatile unsigned long v_volatile;
const struct node *const v_const_both = 0;
lock_t v_lock;
struct layout v_layout;
void *v_void_ptr;
long double v_long_double;
_Bool v_bool;

#define SIZE(v) printf("%s %zu\n", #v, sizeof(v))
#define OFF(m) printf(".%s %zu\n", #m, offsetof(struct layout, m))

int main(void)
{
	SIZE(v_int); SIZE(v_string); SIZE(v_const_ptr); SIZE(v_node);
	SIZE(v_sock); SIZE(v_union); SIZE(v_enum); SIZE(v_u32); SIZE(v_matrix);
	SIZE(v_ptr_array); SIZE(v_fn); SIZE(v_fn_ret_ptr); SIZE(v_fn_variadic);
	SIZE(v_volatile); SIZE(v_const_both); SIZE(v_lock); SIZE(v_layout);
	SIZE(v_void_ptr); SIZE(v_long_double); SIZE(v_bool);
	OFF(len); OFF(addr); OFF(port); OFF(proto); OFF(kind); OFF(data);
	OFF(lock); OFF(done); OFF(tail);
	return 0;
}
