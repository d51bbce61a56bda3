// SPDX-License-Identifier: GPL-3.0-or-later
/*
 * klasy.so - a GCC 12 plugin that records every struct/union member access
 * of the functions the compiler emits into the non-allocated ELF section
 * .debug_klasy (format: gcc-patches/FORMAT.md), for klasy's access pointcut.
 *
 * It reads the C front end's trees at PLUGIN_PRE_GENERICIZE, where accesses
 * still carry macro history and whole chains such as p->thread->fs; asks the
 * call graph at IPA start which functions survive; and writes the section at
 * the end of the unit. It never changes the trees, so the code is the same
 * with and without it.
 *
 * It must never crash the compiler: an internal compiler error would break a
 * kernel build. Every tree accessor is guarded; shapes it does not know are
 * recorded as "unsupported" with a reason instead.
 *
 * Usage: gcc -fplugin=klasy.so [-fplugin-arg-klasy-dump[=FILE]]
 *            [-fplugin-arg-klasy-all-functions] ...
 */
#define INCLUDE_STRING
#define INCLUDE_MAP
#define INCLUDE_SET
#define INCLUDE_VECTOR
#include <algorithm>
#include <unordered_map>
#include "gcc-plugin.h"
#include "plugin-version.h"
#include "tree.h"
#include "tree-iterator.h"
#include "stringpool.h"
#include "cgraph.h"
#include "tree-nested.h"
#include "output.h"
#include "c-family/c-common.h"
#include "diagnostic-core.h"

int plugin_is_GPL_compatible;

namespace {

const char plugin_name_default[] = "klasy";
const unsigned format_version = 1;
const unsigned header_size = 32;

const char help_text[] =
	"records struct/union member accesses into the ELF section .debug_klasy\n"
	"  -fplugin-arg-klasy-dump[=FILE]     also write a readable dump (default: OBJECT-BASENAME.klasy.txt)\n"
	"  -fplugin-arg-klasy-all-functions   keep functions the call graph drops too (debugging)\n";

struct plugin_info klasy_info = {
	/* .version = */ "1",
	/* .help = */ help_text,
};

enum access_mode { MODE_READ = 0, MODE_WRITE = 1, MODE_RW = 2, MODE_ADDR = 3 };
const char *const mode_names[] = { "read", "write", "rw", "addr" };

enum base_kind { BASE_PARAM = 0, BASE_LOCAL, BASE_STATIC, BASE_GLOBAL, BASE_CALL, BASE_UNSUPPORTED, BASE_NONE };
const char *const base_names[] = { "param", "local", "static", "global", "call", "unsupported", "none" };

enum record_flags {
	F_UNION = 1 << 0,        // the container is a union
	F_VIA_ANON = 1 << 1,     // reached through anonymous members (hops collapsed)
	F_BITFIELD = 1 << 2,
	F_ANON_TYPE = 1 << 3,    // container has no tag: name is its typedef (or empty)
	F_NO_OFFSET = 1 << 4,    // offset/size not constant (unsupported layout)
	F_CONTAINER_OF = 1 << 5, // base goes back from a member (negative offset)
};

struct base_info {
	int kind = BASE_NONE;
	std::string var;    // root variable or callee
	std::string expr;   // C expression of the container's address
	std::string reason; // why kind is unsupported
	long long offset = 0; // container_of adjustment in bytes
	bool container_of = false;
};

struct access_record {
	std::string strct;      // tag, or typedef name for an anonymous type
	std::string decl_file;  // declaration of an anonymous type
	unsigned decl_line = 0;
	std::string member;
	unsigned flags = 0;
	int mode = MODE_READ;
	unsigned long long bit_offset = 0, bit_size = 0;
	std::string file;       // hook: outermost macro expansion point
	unsigned line = 0, col = 0;
	std::string spell_file; // spelling point
	unsigned spell_line = 0, spell_col = 0;
	unsigned stmt_line = 0; // enclosing statement's line in `file`, if it differs
	base_info base;
};

struct function_info {
	std::string name, file;
	unsigned line = 0;
	bool is_static = false;
	std::vector<access_record> recs;
};

/* Options. */
bool opt_dump = false;
std::string opt_dump_file;
bool opt_all_functions = false;

/* Functions seen at PRE_GENERICIZE in order. Keys are only compared, never
 * dereferenced after parsing: a node the call graph dropped may be freed. */
std::vector<function_info> functions;
std::map<tree, size_t> function_index;
std::set<tree> kept_functions;
bool kept_known = false;

/* ---------------------------------------------------------------------- */
/* Locations */

struct place {
	std::string file;
	unsigned line = 0, col = 0;
};

place to_place(const expanded_location &x)
{
	place p;
	if (x.file)
		p.file = x.file;
	p.line = x.line > 0 ? x.line : 0;
	p.col = x.column > 0 ? x.column : 0;
	return p;
}

place spelling_place(location_t loc)
{
	if (loc <= BUILTINS_LOCATION)
		return place();
	return to_place(expand_location_to_spelling_point(loc));
}

/* The outermost macro expansion point: the line .debug_line uses. */
place hook_place(location_t loc)
{
	if (loc <= BUILTINS_LOCATION)
		return place();
	return to_place(expand_location(linemap_resolve_location(line_table, loc, LRK_MACRO_EXPANSION_POINT, NULL)));
}

/* ---------------------------------------------------------------------- */
/* Guarded tree helpers */

const char *ident(tree id)
{
	if (!id || TREE_CODE(id) != IDENTIFIER_NODE)
		return NULL;
	return IDENTIFIER_POINTER(id);
}

const char *decl_name(tree d)
{
	if (!d || !DECL_P(d))
		return NULL;
	return ident(DECL_NAME(d));
}

bool int_value(tree t, long long *out)
{
	if (!t || TREE_CODE(t) != INTEGER_CST)
		return false;
	tree type = TREE_TYPE(t);
	if (!type || TYPE_PRECISION(type) > HOST_BITS_PER_WIDE_INT)
		return false;
	/* sizetype is unsigned: container_of's "-24" arrives as 2^64-24. */
	*out = (long long)wi::to_wide(t).to_shwi();
	return true;
}

bool uint_value(tree t, unsigned long long *out)
{
	if (!t || TREE_CODE(t) != INTEGER_CST || !tree_fits_uhwi_p(t))
		return false;
	*out = tree_to_uhwi(t);
	return true;
}

bool field_bit_position(tree f, unsigned long long *out)
{
	unsigned long long off, bit;
	if (!f || TREE_CODE(f) != FIELD_DECL)
		return false;
	if (!uint_value(DECL_FIELD_OFFSET(f), &off) || !uint_value(DECL_FIELD_BIT_OFFSET(f), &bit))
		return false;
	*out = off * BITS_PER_UNIT + bit;
	return true;
}

tree strip_conversions(tree t)
{
	for (int i = 0; t && i < 64; i++) {
		switch (TREE_CODE(t)) {
		case NOP_EXPR:
		case CONVERT_EXPR:
		case NON_LVALUE_EXPR:
		case VIEW_CONVERT_EXPR:
			t = TREE_OPERAND(t, 0);
			continue;
		default:
			return t;
		}
	}
	return t;
}

/* Structural equality of two lvalues (compound assignment shares or
 * rebuilds its left side inside the right side). */
bool same_ref(tree a, tree b, int depth = 0)
{
	a = strip_conversions(a);
	b = strip_conversions(b);
	if (a == b)
		return a != NULL_TREE;
	if (!a || !b || depth > 32 || TREE_CODE(a) != TREE_CODE(b))
		return false;
	switch (TREE_CODE(a)) {
	case COMPONENT_REF:
		return TREE_OPERAND(a, 1) == TREE_OPERAND(b, 1) &&
		       same_ref(TREE_OPERAND(a, 0), TREE_OPERAND(b, 0), depth + 1);
	case INDIRECT_REF:
		return same_ref(TREE_OPERAND(a, 0), TREE_OPERAND(b, 0), depth + 1);
	case ARRAY_REF:
	case MEM_REF:
	case POINTER_PLUS_EXPR:
		return same_ref(TREE_OPERAND(a, 0), TREE_OPERAND(b, 0), depth + 1) &&
		       same_ref(TREE_OPERAND(a, 1), TREE_OPERAND(b, 1), depth + 1);
	case INTEGER_CST:
		return tree_int_cst_equal(a, b);
	default:
		return false;
	}
}

/* The value of a statement expression: the last statement, or what it
 * assigns to the TARGET_EXPR's slot. */
tree last_statement(tree t)
{
	for (int i = 0; t && i < 64; i++) {
		if (TREE_CODE(t) == BIND_EXPR) {
			t = BIND_EXPR_BODY(t);
		} else if (TREE_CODE(t) == STATEMENT_LIST) {
			if (!STATEMENT_LIST_HEAD(t))
				return NULL_TREE;
			t = tsi_stmt(tsi_last(t));
		} else {
			return t;
		}
	}
	return NULL_TREE;
}

/* ---------------------------------------------------------------------- */
/* Base: how the container's address is computed */

struct describer {
	base_info &b;
	explicit describer(base_info &bi) : b(bi) {}

	std::string unsupported(const std::string &why)
	{
		if (b.kind != BASE_UNSUPPORTED) {
			b.kind = BASE_UNSUPPORTED;
			b.reason = why;
		}
		return "?";
	}

	void root(int kind, const std::string &var)
	{
		if (b.kind == BASE_NONE) {
			b.kind = kind;
			b.var = var;
		}
	}

	/* s as the operand of ->, . or []: what binds looser (&x, *x, a
	 * cast, a + b) needs parentheses, or "(char *)p - 40->f" would read
	 * as p - (40->f). */
	static std::string operand(const std::string &s)
	{
		bool wrap = !s.empty() && (s[0] == '&' || s[0] == '*' || s.compare(0, 8, "(char *)") == 0);
		int nest = 0;
		for (size_t i = 0; i < s.size() && !wrap; i++) {
			if (s[i] == '(' || s[i] == '[')
				nest++;
			else if (s[i] == ')' || s[i] == ']')
				nest--;
			else if (s[i] == ' ' && nest == 0)
				wrap = true; /* a binary operator */
		}
		return wrap ? "(" + s + ")" : s;
	}

	static bool is_macro_temporary(tree d)
	{
		const char *n = decl_name(d);
		if (DECL_ARTIFICIAL(d) || !n)
			return true;
		/* Kernel macros name their temporaries __mptr, __ptr, ___p1,
		 * tcp_ptr__, pfo_val__... */
		size_t len = strlen(n);
		return (n[0] == '_' && n[1] == '_') || (len > 2 && n[len - 1] == '_' && n[len - 2] == '_');
	}

	std::string var(tree d, int depth)
	{
		tree init = DECL_INITIAL(d);
		bool local = DECL_CONTEXT(d) && TREE_CODE(DECL_CONTEXT(d)) == FUNCTION_DECL;
		/* Macro temporaries holding an address stand for what they were
		 * set from; a struct declared by a macro is just a local. */
		if (local && TREE_CODE(d) == VAR_DECL && !TREE_STATIC(d) && is_macro_temporary(d) &&
		    !AGGREGATE_TYPE_P(TREE_TYPE(d))) {
			/* NL_SET_ERR_MSG's __extack = (extack) is set from the
			 * variable itself, which is a decl, not an expression. */
			if (init && init != error_mark_node && (EXPR_P(init) || DECL_P(init)))
				return desc(init, depth + 1);
			/* RELOC_HIDE (per_cpu_ptr) launders the address through
			 * inline asm into __ptr: nothing to follow. */
			return unsupported(std::string("macro temporary ") + (decl_name(d) ? decl_name(d) : "") +
					   " set by a statement (inline asm?)");
		}
		const char *n = decl_name(d);
		if (!n)
			return unsupported("compiler temporary");
		if (TREE_CODE(d) == PARM_DECL)
			root(BASE_PARAM, n);
		else if (local && !TREE_STATIC(d) && !DECL_EXTERNAL(d))
			root(BASE_LOCAL, n);
		else if (TREE_PUBLIC(d) || DECL_EXTERNAL(d))
			root(BASE_GLOBAL, n);
		else
			root(BASE_STATIC, n);
		return n;
	}

	std::string index(tree t, int depth)
	{
		long long v;
		if (int_value(t, &v))
			return std::to_string(v);
		base_info scratch;
		describer d(scratch);
		std::string s = d.desc(t, depth + 1);
		return scratch.kind == BASE_UNSUPPORTED ? std::string("?") : s;
	}

	/* a->b.c for a COMPONENT_REF chain, skipping anonymous members. */
	std::string component(tree t, int depth)
	{
		std::vector<const char *> names;
		tree o = t;
		for (int i = 0; o && TREE_CODE(o) == COMPONENT_REF && i < 64; i++) {
			const char *n = decl_name(TREE_OPERAND(o, 1));
			if (n)
				names.push_back(n);
			o = TREE_OPERAND(o, 0);
		}
		std::string s;
		tree io = strip_conversions(o);
		if (io && TREE_CODE(io) == INDIRECT_REF)
			s = operand(desc(TREE_OPERAND(io, 0), depth + 1)) + "->";
		else
			s = operand(desc(o, depth + 1)) + ".";
		for (size_t i = names.size(); i-- > 0;)
			s += std::string(names[i]) + (i ? "." : "");
		return s;
	}

	std::string call(tree t, int depth)
	{
		tree fn = CALL_EXPR_FN(t);
		std::string callee;
		tree f = strip_conversions(fn);
		if (f && TREE_CODE(f) == ADDR_EXPR && TREE_OPERAND(f, 0) &&
		    TREE_CODE(TREE_OPERAND(f, 0)) == FUNCTION_DECL && decl_name(TREE_OPERAND(f, 0))) {
			callee = decl_name(TREE_OPERAND(f, 0));
		} else {
			base_info scratch;
			describer d(scratch);
			callee = "(" + d.desc(fn, depth + 1) + ")";
		}
		root(BASE_CALL, callee);
		std::string s = callee + "(";
		int n = call_expr_nargs(t);
		for (int i = 0; i < n; i++) {
			base_info scratch;
			describer d(scratch);
			std::string a = d.desc(CALL_EXPR_ARG(t, i), depth + 1);
			s += (i ? ", " : "") + a;
		}
		return s + ")";
	}

	/* p + off: "&p[i]" when off is a whole number of elements (the front
	 * end turns p[i] into *(p + i * size)), else a byte offset, which is
	 * negative for container_of. Sets *indexed for the first form. */
	std::string pointer_plus(tree t, int depth, std::string *ps, std::string *idx)
	{
		tree p = TREE_OPERAND(t, 0), off = TREE_OPERAND(t, 1);
		tree pt = TREE_TYPE(t);
		unsigned long long elem = 1;
		if (pt && POINTER_TYPE_P(pt) && TREE_TYPE(pt) && COMPLETE_TYPE_P(TREE_TYPE(pt)) &&
		    !VOID_TYPE_P(TREE_TYPE(pt)))
			uint_value(TYPE_SIZE_UNIT(TREE_TYPE(pt)), &elem);
		if (elem == 0)
			elem = 1;
		long long v;
		*ps = desc(p, depth + 1);
		idx->clear();
		if (int_value(off, &v)) {
			if (v < 0) {
				b.container_of = true;
				b.offset += v;
				return "(char *)" + *ps + " - " + std::to_string(-v);
			}
			if (v % (long long)elem == 0) {
				*idx = std::to_string(v / (long long)elem);
				return "&" + operand(*ps) + "[" + *idx + "]";
			}
			return "(char *)" + *ps + " + " + std::to_string(v);
		}
		tree o = strip_conversions(off);
		if (o && TREE_CODE(o) == MULT_EXPR) {
			unsigned long long m;
			if (uint_value(TREE_OPERAND(o, 1), &m) && m == elem) {
				*idx = index(TREE_OPERAND(o, 0), depth);
				return "&" + operand(*ps) + "[" + *idx + "]";
			}
		}
		if (elem == 1) {
			*idx = index(off, depth);
			return "&" + operand(*ps) + "[" + *idx + "]";
		}
		return "(char *)" + *ps + " + " + index(off, depth);
	}

	std::string desc(tree t, int depth)
	{
		if (depth > 48)
			return unsupported("expression too deep");
		if (!t || t == error_mark_node)
			return unsupported("missing operand");
		switch (TREE_CODE(t)) {
		case NOP_EXPR:
		case CONVERT_EXPR:
		case NON_LVALUE_EXPR:
		case VIEW_CONVERT_EXPR:
		case SAVE_EXPR:
			return desc(TREE_OPERAND(t, 0), depth + 1);
		case C_MAYBE_CONST_EXPR:
		case COMPOUND_EXPR:
			return desc(TREE_OPERAND(t, 1), depth + 1);
		case TARGET_EXPR: {
			tree slot = TREE_OPERAND(t, 0);
			tree last = last_statement(TREE_OPERAND(t, 1));
			if (last && (TREE_CODE(last) == MODIFY_EXPR || TREE_CODE(last) == INIT_EXPR) &&
			    TREE_OPERAND(last, 0) == slot)
				return desc(TREE_OPERAND(last, 1), depth + 1);
			return unsupported("statement expression without a value");
		}
		case BIND_EXPR:
		case STATEMENT_LIST: {
			tree last = last_statement(t);
			if (!last || last == t)
				return unsupported("statement expression without a value");
			return desc(last, depth + 1);
		}
		case PARM_DECL:
		case VAR_DECL:
			return var(t, depth);
		case RESULT_DECL:
			root(BASE_LOCAL, "<retval>");
			return "<retval>";
		case FUNCTION_DECL:
			return decl_name(t) ? decl_name(t) : unsupported("anonymous function");
		case INDIRECT_REF: {
			tree p = strip_conversions(TREE_OPERAND(t, 0));
			if (p && TREE_CODE(p) == POINTER_PLUS_EXPR) {
				std::string ps, idx, s = pointer_plus(p, depth + 1, &ps, &idx);
				if (!idx.empty())
					return operand(ps) + "[" + idx + "]";
				return "*(" + s + ")";
			}
			/* The front end folded p[0] into *p. */
			return operand(desc(TREE_OPERAND(t, 0), depth + 1)) + "[0]";
		}
		case MEM_REF: {
			long long v;
			if (int_value(TREE_OPERAND(t, 1), &v) && v == 0)
				return operand(desc(TREE_OPERAND(t, 0), depth + 1)) + "[0]";
			return unsupported("memory reference with offset");
		}
		case COMPONENT_REF:
			return component(t, depth);
		case ARRAY_REF:
			return operand(desc(TREE_OPERAND(t, 0), depth + 1)) + "[" + index(TREE_OPERAND(t, 1), depth) + "]";
		case POINTER_PLUS_EXPR: {
			std::string ps, idx;
			return pointer_plus(t, depth, &ps, &idx);
		}
		case ADDR_EXPR: {
			tree o = TREE_OPERAND(t, 0);
			if (o && TREE_CODE(o) == FUNCTION_DECL)
				return desc(o, depth + 1);
			return "&" + desc(o, depth + 1);
		}
		case CALL_EXPR:
			return call(t, depth);
		case INTEGER_CST: {
			long long v;
			if (int_value(t, &v))
				return std::to_string(v);
			return unsupported("large constant");
		}
		case COND_EXPR:
			return unsupported("conditional expression");
		case COMPOUND_LITERAL_EXPR:
			return unsupported("compound literal");
		case PLUS_EXPR:
		case MINUS_EXPR: {
			/* Integer arithmetic on an address: per-cpu pointers
			 * (this_cpu_ptr) add the cpu's offset this way. */
			std::string l = desc(TREE_OPERAND(t, 0), depth + 1);
			std::string r = desc(TREE_OPERAND(t, 1), depth + 1);
			return "(" + l + (TREE_CODE(t) == PLUS_EXPR ? " + " : " - ") + r + ")";
		}
		case PREINCREMENT_EXPR:
		case PREDECREMENT_EXPR:
		case POSTINCREMENT_EXPR:
		case POSTDECREMENT_EXPR:
			return unsupported("the base is incremented in the same expression");
		default:
			return unsupported(std::string("expression ") + get_tree_code_name(TREE_CODE(t)));
		}
	}
};

/* The container object's address: "skb" for skb->len, "&s" for s.len. */
base_info describe_base(tree obj)
{
	base_info b;
	describer d(b);
	tree o = strip_conversions(obj);
	if (o && TREE_CODE(o) == INDIRECT_REF) {
		b.expr = d.desc(TREE_OPERAND(o, 0), 0);
	} else if (o && TREE_CODE(o) == MEM_REF) {
		long long v;
		if (int_value(TREE_OPERAND(o, 1), &v) && v == 0)
			b.expr = d.desc(TREE_OPERAND(o, 0), 0);
		else
			b.expr = d.unsupported("memory reference with offset");
	} else {
		b.expr = "&" + d.desc(o, 0);
	}
	if (b.kind == BASE_UNSUPPORTED) {
		b.var.clear();
	} else if (b.kind == BASE_NONE) {
		d.unsupported("no variable or call at the root");
	}
	return b;
}

/* ---------------------------------------------------------------------- */
/* Walking a function body */

/* The mode of the object an __atomic_/__sync_ builtin's first argument
 * points to, or -1 for other calls. */
int atomic_builtin_mode(tree call)
{
	tree fn = strip_conversions(CALL_EXPR_FN(call));
	if (!fn || TREE_CODE(fn) != ADDR_EXPR)
		return -1;
	tree d = TREE_OPERAND(fn, 0);
	if (!d || TREE_CODE(d) != FUNCTION_DECL || !fndecl_built_in_p(d, BUILT_IN_NORMAL))
		return -1;
	const char *n = decl_name(d);
	if (!n)
		return -1;
	if (!strncmp(n, "__atomic_load", 13))
		return MODE_READ;
	if (!strncmp(n, "__atomic_store", 14) || !strncmp(n, "__atomic_clear", 14))
		return MODE_WRITE;
	if (!strncmp(n, "__atomic_", 9) || !strncmp(n, "__sync_", 7))
		return MODE_RW;
	return -1;
}

struct walker {
	function_info &fn;
	location_t stmt_loc = UNKNOWN_LOCATION;
	std::set<tree> shared_seen;
	int depth = 0;

	explicit walker(function_info &f) : fn(f) {}

	void type_name(tree obj, access_record &r)
	{
		tree type = obj ? TREE_TYPE(obj) : NULL_TREE;
		tree mv = type ? TYPE_MAIN_VARIANT(type) : NULL_TREE;
		if (!mv) {
			r.flags |= F_ANON_TYPE;
			return;
		}
		if (TREE_CODE(mv) == UNION_TYPE)
			r.flags |= F_UNION;
		tree n = TYPE_NAME(mv);
		if (n && TREE_CODE(n) == IDENTIFIER_NODE) {
			r.strct = IDENTIFIER_POINTER(n);
			return;
		}
		/* No tag: C names an anonymous struct after its first typedef. */
		r.flags |= F_ANON_TYPE;
		const char *tn = NULL;
		if (n && TREE_CODE(n) == TYPE_DECL)
			tn = decl_name(n);
		if (!tn && TYPE_NAME(type) && TREE_CODE(TYPE_NAME(type)) == TYPE_DECL)
			tn = decl_name(TYPE_NAME(type));
		if (tn)
			r.strct = tn;
		location_t loc = UNKNOWN_LOCATION;
		if (TYPE_STUB_DECL(mv) && DECL_P(TYPE_STUB_DECL(mv)))
			loc = DECL_SOURCE_LOCATION(TYPE_STUB_DECL(mv));
		if (loc <= BUILTINS_LOCATION && n && DECL_P(n))
			loc = DECL_SOURCE_LOCATION(n);
		if (loc <= BUILTINS_LOCATION && (TREE_CODE(mv) == RECORD_TYPE || TREE_CODE(mv) == UNION_TYPE) &&
		    TYPE_FIELDS(mv))
			loc = DECL_SOURCE_LOCATION(TYPE_FIELDS(mv));
		place p = spelling_place(loc);
		r.decl_file = p.file;
		r.decl_line = p.line;
	}

	void record(tree ref, int mode, location_t loc)
	{
		tree field = TREE_OPERAND(ref, 1);
		if (!field || TREE_CODE(field) != FIELD_DECL || !decl_name(field))
			return; /* anonymous hop: part of the named access around it */
		access_record r;
		r.member = decl_name(field);
		r.mode = mode;
		bool have_off = field_bit_position(field, &r.bit_offset);
		tree obj = TREE_OPERAND(ref, 0);
		for (int i = 0; obj && TREE_CODE(obj) == COMPONENT_REF && i < 64; i++) {
			tree f = TREE_OPERAND(obj, 1);
			if (!f || TREE_CODE(f) != FIELD_DECL || decl_name(f))
				break;
			unsigned long long o = 0;
			if (!field_bit_position(f, &o))
				have_off = false;
			r.bit_offset += o;
			r.flags |= F_VIA_ANON;
			obj = TREE_OPERAND(obj, 0);
		}
		if (!uint_value(DECL_SIZE(field), &r.bit_size))
			r.bit_size = 0; /* flexible array member */
		if (!have_off) {
			r.flags |= F_NO_OFFSET;
			r.bit_offset = 0;
		}
		if (DECL_BIT_FIELD_TYPE(field))
			r.flags |= F_BITFIELD;
		type_name(obj, r);

		place h = hook_place(loc), s = spelling_place(loc);
		r.file = h.file;
		r.line = h.line;
		r.col = h.col;
		if (s.file != h.file || s.line != h.line || s.col != h.col) {
			r.spell_file = s.file;
			r.spell_line = s.line;
			r.spell_col = s.col;
		}
		if (stmt_loc > BUILTINS_LOCATION) {
			place st = hook_place(stmt_loc);
			if (st.file == r.file && st.line != r.line && st.line)
				r.stmt_line = st.line;
		}
		r.base = describe_base(obj);
		if (r.base.container_of)
			r.flags |= F_CONTAINER_OF;
		fn.recs.push_back(r);
	}

	void walk_stmt(tree t)
	{
		location_t saved = stmt_loc;
		if (t && EXPR_P(t) && EXPR_HAS_LOCATION(t))
			stmt_loc = EXPR_LOCATION(t);
		walk(t, MODE_READ, stmt_loc);
		stmt_loc = saved;
	}

	void walk_operands(tree t, int mode, location_t loc)
	{
		int n = TREE_OPERAND_LENGTH(t);
		for (int i = 0; i < n; i++)
			walk(TREE_OPERAND(t, i), mode, loc);
	}

	void walk(tree t, int mode, location_t loc)
	{
		if (!t || t == error_mark_node)
			return;
		if (depth > 2000)
			return; /* pathological nesting: better a missing record than a crashed compiler */
		depth++;
		if (EXPR_P(t) && EXPR_HAS_LOCATION(t))
			loc = EXPR_LOCATION(t);
		visit(t, mode, loc);
		depth--;
	}

	void visit(tree t, int mode, location_t loc)
	{
		enum tree_code code = TREE_CODE(t);
		switch (code) {
		case STATEMENT_LIST:
			for (tree_stmt_iterator i = tsi_start(t); !tsi_end_p(i); tsi_next(&i))
				walk_stmt(tsi_stmt(i));
			return;
		case BIND_EXPR:
			walk_stmt(BIND_EXPR_BODY(t));
			return;
		case DECL_EXPR: {
			tree d = DECL_EXPR_DECL(t);
			if (d && TREE_CODE(d) == VAR_DECL && !TREE_STATIC(d) && DECL_INITIAL(d))
				walk(DECL_INITIAL(d), MODE_READ, loc);
			return;
		}
		case MODIFY_EXPR:
		case INIT_EXPR: {
			tree lhs = TREE_OPERAND(t, 0), rhs = TREE_OPERAND(t, 1);
			tree r = strip_conversions(rhs);
			if (r && (BINARY_CLASS_P(r) || TREE_CODE(r) == TRUTH_AND_EXPR || TREE_CODE(r) == TRUTH_OR_EXPR) &&
			    same_ref(TREE_OPERAND(r, 0), lhs)) {
				walk(lhs, MODE_RW, loc); /* x op= y */
				walk(TREE_OPERAND(r, 1), MODE_READ, loc);
				return;
			}
			walk(lhs, MODE_WRITE, loc);
			walk(rhs, MODE_READ, loc);
			return;
		}
		case PREINCREMENT_EXPR:
		case PREDECREMENT_EXPR:
		case POSTINCREMENT_EXPR:
		case POSTDECREMENT_EXPR:
			walk(TREE_OPERAND(t, 0), MODE_RW, loc);
			return;
		case ADDR_EXPR:
			walk(TREE_OPERAND(t, 0), MODE_ADDR, loc);
			return;
		case INDIRECT_REF:
		case MEM_REF: {
			/* READ_ONCE/WRITE_ONCE: *(volatile T *)&x has the mode of the
			 * dereference, not "address taken". */
			tree p = strip_conversions(TREE_OPERAND(t, 0));
			if (p && TREE_CODE(p) == ADDR_EXPR)
				walk(TREE_OPERAND(p, 0), mode, loc);
			else
				walk(TREE_OPERAND(t, 0), MODE_READ, loc);
			if (code == MEM_REF)
				walk(TREE_OPERAND(t, 1), MODE_READ, loc);
			return;
		}
		case COMPONENT_REF:
			record(t, mode, loc);
			/* A write to s.inner.x writes inside s.inner as well. */
			walk(TREE_OPERAND(t, 0), mode, loc);
			return;
		case ARRAY_REF:
		case ARRAY_RANGE_REF:
			walk(TREE_OPERAND(t, 0), mode, loc);
			walk(TREE_OPERAND(t, 1), MODE_READ, loc);
			return;
		case BIT_FIELD_REF:
		case REALPART_EXPR:
		case IMAGPART_EXPR:
			walk(TREE_OPERAND(t, 0), mode, loc);
			return;
		case SAVE_EXPR:
		case TARGET_EXPR:
			if (!shared_seen.insert(t).second)
				return;
			walk_operands(t, mode == MODE_ADDR ? MODE_ADDR : MODE_READ, loc);
			return;
		case COND_EXPR:
			if (!TREE_TYPE(t) || VOID_TYPE_P(TREE_TYPE(t))) {
				/* if-statement: the condition belongs to the `if` line. */
				location_t saved = stmt_loc;
				if (EXPR_HAS_LOCATION(t))
					stmt_loc = EXPR_LOCATION(t);
				walk(TREE_OPERAND(t, 0), MODE_READ, loc);
				stmt_loc = saved;
				walk_stmt(TREE_OPERAND(t, 1));
				walk_stmt(TREE_OPERAND(t, 2));
				return;
			}
			walk(TREE_OPERAND(t, 0), MODE_READ, loc);
			walk(TREE_OPERAND(t, 1), mode, loc);
			walk(TREE_OPERAND(t, 2), mode, loc);
			return;
		case ASM_EXPR: {
			for (tree l = ASM_OUTPUTS(t); l && TREE_CODE(l) == TREE_LIST; l = TREE_CHAIN(l)) {
				int m = MODE_WRITE;
				tree c = TREE_PURPOSE(l) ? TREE_VALUE(TREE_PURPOSE(l)) : NULL_TREE;
				if (c && TREE_CODE(c) == STRING_CST && strchr(TREE_STRING_POINTER(c), '+'))
					m = MODE_RW;
				walk(TREE_VALUE(l), m, loc);
			}
			for (tree l = ASM_INPUTS(t); l && TREE_CODE(l) == TREE_LIST; l = TREE_CHAIN(l))
				walk(TREE_VALUE(l), MODE_READ, loc);
			return;
		}
		case CONSTRUCTOR: {
			unsigned i;
			tree v;
			FOR_EACH_CONSTRUCTOR_VALUE(CONSTRUCTOR_ELTS(t), i, v)
				walk(v, MODE_READ, loc);
			return;
		}
		case CALL_EXPR: {
			/* _Atomic members reach us as __atomic_* builtins taking
			 * their address: give them the builtin's mode. */
			int m = atomic_builtin_mode(t);
			int n = call_expr_nargs(t);
			walk(CALL_EXPR_FN(t), MODE_READ, loc);
			for (int i = 0; i < n; i++) {
				tree a = CALL_EXPR_ARG(t, i);
				tree sa = strip_conversions(a);
				if (i == 0 && m >= 0 && sa && TREE_CODE(sa) == ADDR_EXPR)
					walk(TREE_OPERAND(sa, 0), m, loc);
				else
					walk(a, MODE_READ, loc);
			}
			return;
		}
		case TREE_LIST:
			for (tree l = t; l && TREE_CODE(l) == TREE_LIST; l = TREE_CHAIN(l))
				walk(TREE_VALUE(l), mode, loc);
			return;
		case SIZEOF_EXPR:
		case PAREN_SIZEOF_EXPR:
			return; /* not evaluated */
		case FOR_STMT:
			walk_stmt(TREE_OPERAND(t, 0)); /* init */
			walk_cond(t, TREE_OPERAND(t, 1), loc);
			walk_cond(t, TREE_OPERAND(t, 2), loc); /* increment */
			walk_stmt(TREE_OPERAND(t, 3));
			return;
		case WHILE_STMT:
			walk_cond(t, TREE_OPERAND(t, 0), loc);
			walk_stmt(TREE_OPERAND(t, 1));
			return;
		case DO_STMT:
			/* The condition follows the body: it is its own statement. */
			walk_stmt(TREE_OPERAND(t, 0));
			walk_stmt(TREE_OPERAND(t, 1));
			return;
		case SWITCH_STMT:
		case SWITCH_EXPR:
			walk_cond(t, TREE_OPERAND(t, 0), loc);
			walk_stmt(TREE_OPERAND(t, 1));
			return;
		default:
			if (EXPR_P(t))
				walk_operands(t, MODE_READ, loc);
			return;
		}
	}

	/* A loop or switch condition: its statement line is the keyword's. */
	void walk_cond(tree stmt, tree cond, location_t loc)
	{
		location_t saved = stmt_loc;
		if (EXPR_HAS_LOCATION(stmt))
			stmt_loc = EXPR_LOCATION(stmt);
		walk(cond, MODE_READ, loc);
		stmt_loc = saved;
	}
};

void record_function(tree fndecl, int depth)
{
	if (!fndecl || TREE_CODE(fndecl) != FUNCTION_DECL || !DECL_SAVED_TREE(fndecl) || depth > 16)
		return;
	function_info f;
	const char *n = decl_name(fndecl);
	f.name = n ? n : "<anonymous>";
	place p = hook_place(DECL_SOURCE_LOCATION(fndecl));
	f.file = p.file;
	f.line = p.line;
	f.is_static = !TREE_PUBLIC(fndecl);
	walker w(f);
	w.walk_stmt(DECL_SAVED_TREE(fndecl));

	auto it = function_index.find(fndecl);
	if (it != function_index.end()) {
		functions[it->second] = f;
	} else {
		function_index[fndecl] = functions.size();
		functions.push_back(f);
	}

	/* GNU C nested functions are genericized with their parent, without
	 * an event of their own. */
	cgraph_node *node = cgraph_node::get(fndecl);
	for (cgraph_node *n = node ? first_nested_function(node) : NULL; n; n = next_nested_function(n))
		record_function(n->decl, depth + 1);
}

void on_pre_genericize(void *event_data, void *)
{
	if (seen_error())
		return;
	record_function((tree)event_data, 0);
}

void on_ipa_start(void *, void *)
{
	cgraph_node *node;
	FOR_EACH_FUNCTION(node) {
		if (node->has_gimple_body_p())
			kept_functions.insert(node->decl);
	}
	kept_known = true;
}

/* ---------------------------------------------------------------------- */
/* Encoding: gcc-patches/FORMAT.md */

struct encoder {
	std::string out;
	std::string strtab{std::string(1, '\0')};
	std::unordered_map<std::string, unsigned> strs;

	unsigned str(const std::string &s)
	{
		if (s.empty())
			return 0;
		auto it = strs.find(s);
		if (it != strs.end())
			return it->second;
		unsigned off = strtab.size();
		strtab += s;
		strtab += '\0';
		strs[s] = off;
		return off;
	}

	static void uleb(std::string &o, unsigned long long v)
	{
		do {
			unsigned char c = v & 0x7f;
			v >>= 7;
			if (v)
				c |= 0x80;
			o += (char)c;
		} while (v);
	}

	static void sleb(std::string &o, long long v)
	{
		for (;;) {
			unsigned char c = v & 0x7f;
			v >>= 7; /* arithmetic shift */
			bool done = (v == 0 && !(c & 0x40)) || (v == -1 && (c & 0x40));
			if (!done)
				c |= 0x80;
			o += (char)c;
			if (done)
				break;
		}
	}

	static void u32(std::string &o, unsigned v)
	{
		for (int i = 0; i < 4; i++)
			o += (char)((v >> (8 * i)) & 0xff);
	}
};

std::string encode_record(encoder &e, unsigned func, const access_record &r)
{
	std::string o;
	encoder::uleb(o, func);
	encoder::uleb(o, e.str(r.strct));
	encoder::uleb(o, e.str(r.member));
	encoder::uleb(o, r.flags);
	encoder::uleb(o, r.mode);
	encoder::uleb(o, r.bit_offset);
	encoder::uleb(o, r.bit_size);
	encoder::uleb(o, e.str(r.file));
	encoder::uleb(o, r.line);
	encoder::uleb(o, r.col);
	encoder::uleb(o, r.stmt_line);
	encoder::uleb(o, e.str(r.spell_file));
	encoder::uleb(o, r.spell_line);
	encoder::uleb(o, r.spell_col);
	encoder::uleb(o, r.base.kind);
	encoder::uleb(o, e.str(r.base.var));
	encoder::uleb(o, e.str(r.base.expr));
	encoder::sleb(o, r.base.offset);
	encoder::uleb(o, e.str(r.base.reason));
	if (r.flags & F_ANON_TYPE) {
		encoder::uleb(o, e.str(r.decl_file));
		encoder::uleb(o, r.decl_line);
	}
	return o;
}

void write_dump(const std::vector<const function_info *> &fns)
{
	std::string path = opt_dump_file;
	if (path.empty()) {
		/* Beside the object, like -fstack-usage's .su: kbuild compiles
		 * through a temporary .s, so asm_file_name is no good. */
		path = dump_base_name ? dump_base_name : main_input_filename;
		if (dump_base_ext && *dump_base_ext && path.size() > strlen(dump_base_ext) &&
		    path.compare(path.size() - strlen(dump_base_ext), std::string::npos, dump_base_ext) == 0)
			path.resize(path.size() - strlen(dump_base_ext));
		path += ".klasy.txt";
	}
	FILE *f = fopen(path.c_str(), "w");
	if (!f) {
		warning(0, "klasy: cannot write dump %qs: %m", path.c_str());
		return;
	}
	fprintf(f, "# klasy .debug_klasy v%u dump of %s\n", format_version, main_input_filename);
	fprintf(f, "# file:line:col function (function file) struct.member mode bit_offset/bit_size base [flags]\n");
	for (const function_info *fn : fns) {
		for (const access_record &r : fn->recs) {
			fprintf(f, "%s:%u:%u %s (%s) %s%s.%s %s %llu/%llu %s:%s%s%s", r.file.c_str(), r.line, r.col,
				fn->name.c_str(), fn->file.c_str(), (r.flags & F_UNION) ? "union " : "",
				r.strct.empty() ? "(anonymous)" : r.strct.c_str(), r.member.c_str(), mode_names[r.mode],
				r.bit_offset, r.bit_size, base_names[r.base.kind], r.base.expr.c_str(),
				r.base.reason.empty() ? "" : " reason=", r.base.reason.c_str());
			if (r.stmt_line)
				fprintf(f, " stmt_line=%u", r.stmt_line);
			if (!r.spell_file.empty())
				fprintf(f, " spelling=%s:%u:%u", r.spell_file.c_str(), r.spell_line, r.spell_col);
			if (r.flags & F_ANON_TYPE)
				fprintf(f, " declared=%s:%u", r.decl_file.c_str(), r.decl_line);
			if (r.flags & F_VIA_ANON)
				fprintf(f, " via-anonymous");
			if (r.flags & F_BITFIELD)
				fprintf(f, " bitfield");
			fputc('\n', f);
		}
	}
	fclose(f);
}

void on_finish_unit(void *, void *)
{
	if (seen_error() || !asm_out_file)
		return;
	std::vector<const function_info *> fns;
	/* Emitted functions in source order. */
	std::vector<std::pair<size_t, tree>> order;
	for (auto &it : function_index)
		order.push_back(std::make_pair(it.second, it.first));
	std::sort(order.begin(), order.end());
	for (auto &o : order) {
		if (!opt_all_functions && kept_known && !kept_functions.count(o.second))
			continue;
		fns.push_back(&functions[o.first]);
	}

	encoder e;
	std::string funcs, recs;
	unsigned nrecs = 0;
	for (size_t i = 0; i < fns.size(); i++) {
		const function_info *fn = fns[i];
		encoder::uleb(funcs, e.str(fn->name));
		encoder::uleb(funcs, e.str(fn->file));
		encoder::uleb(funcs, fn->line);
		encoder::uleb(funcs, fn->is_static ? 1 : 0);
		std::set<std::string> seen; /* a macro argument used twice is one access site */
		for (const access_record &r : fn->recs) {
			std::string b = encode_record(e, i, r);
			if (!seen.insert(b).second)
				continue;
			recs += b;
			nrecs++;
		}
	}
	unsigned cu = e.str(main_input_filename ? main_input_filename : "");
	unsigned producer = e.str(std::string("klasy.so for gcc ") + gcc_version.basever);

	std::string unit;
	unit += "KLSY";
	unit += (char)(format_version & 0xff);
	unit += (char)(format_version >> 8);
	unit += (char)(header_size & 0xff);
	unit += (char)(header_size >> 8);
	unsigned total = header_size + funcs.size() + recs.size() + e.strtab.size();
	encoder::u32(unit, total);
	encoder::u32(unit, fns.size());
	encoder::u32(unit, nrecs);
	encoder::u32(unit, e.strtab.size());
	encoder::u32(unit, cu);
	encoder::u32(unit, producer);
	unit += funcs;
	unit += recs;
	unit += e.strtab;

	fprintf(asm_out_file, "\t.pushsection .debug_klasy,\"\",@progbits\n");
	for (size_t i = 0; i < unit.size(); i += 64) {
		fputs("\t.ascii \"", asm_out_file);
		for (size_t j = i; j < unit.size() && j < i + 64; j++) {
			unsigned char c = unit[j];
			if (c == '"' || c == '\\')
				fprintf(asm_out_file, "\\%c", c);
			else if (c >= 0x20 && c < 0x7f)
				fputc(c, asm_out_file);
			else
				fprintf(asm_out_file, "\\%03o", c);
		}
		fputs("\"\n", asm_out_file);
	}
	fprintf(asm_out_file, "\t.popsection\n");

	if (opt_dump)
		write_dump(fns);
}

} // namespace

int plugin_init(struct plugin_name_args *info, struct plugin_gcc_version *version)
{
	const char *name = info->base_name ? info->base_name : plugin_name_default;
	if (!plugin_default_version_check(version, &gcc_version)) {
		error("%s: this plugin was built for gcc %s and cannot run in gcc %s: rebuild it with "
		      "%<make -C gcc-patches%>",
		      name, gcc_version.basever, version->basever);
		return 1;
	}
	for (int i = 0; i < info->argc; i++) {
		const char *key = info->argv[i].key, *val = info->argv[i].value;
		if (!strcmp(key, "dump")) {
			opt_dump = true;
			if (val)
				opt_dump_file = val;
		} else if (!strcmp(key, "all-functions")) {
			if (val) {
				error("%s: option %<all-functions%> takes no value", name);
				return 1;
			}
			opt_all_functions = true;
		} else {
			error("%s: unknown option %<-fplugin-arg-%s-%s%> (known: %<dump%>, %<dump=FILE%>, %<all-functions%>)", name,
			      name, key);
			return 1;
		}
	}
	register_callback(name, PLUGIN_INFO, NULL, &klasy_info);
	register_callback(name, PLUGIN_PRE_GENERICIZE, on_pre_genericize, NULL);
	register_callback(name, PLUGIN_ALL_IPA_PASSES_START, on_ipa_start, NULL);
	register_callback(name, PLUGIN_FINISH_UNIT, on_finish_unit, NULL);
	return 0;
}
