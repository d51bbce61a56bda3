package aspect

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// mark is written into test inputs where a diagnostic must point; the
// test removes it and expects a diagnostic at that byte.
const mark = "»"

// unmark removes the marks from src and returns their offsets.
func unmark(src string) (string, []int) {
	var offs []int
	for {
		i := strings.Index(src, mark)
		if i < 0 {
			return src, offs
		}
		offs = append(offs, i)
		src = src[:i] + src[i+len(mark):]
	}
}

// advice wraps a pointcut and body into a whole aspect file.
func advice(pc string) string {
	return "<aspect>\n  <advice>\n    <pointcut>" + pc + "</pointcut>\n    <before>f();</before>\n  </advice>\n</aspect>\n"
}

const netflowDef = `  <xflow name="netflow">
    <start><pointcut>access(sk_buff.data) AND within_function(__alloc_skb)</pointcut></start>
  </xflow>
`

// replaceAdvice wraps a pointcut and body into an aspect of one <replace>.
func replaceAdvice(pc, body string) string {
	return "<aspect>\n  <advice>\n    <pointcut>" + pc + "</pointcut>\n    <replace>" + body + "</replace>\n  </advice>\n</aspect>\n"
}

func withFlow(pc string) string {
	return "<aspect>\n" + netflowDef + "  <advice>\n    <pointcut>" + pc + "</pointcut>\n    <before>f();</before>\n  </advice>\n</aspect>\n"
}

func flowRules(rules string) string {
	return "<aspect>\n  <xflow name=\"netflow\">\n" + rules + "  </xflow>\n</aspect>\n"
}

// TestRules holds one failing input per rule of the language. Each
// input marks with » every place a diagnostic must point at, and the
// diagnostics must say what would be accepted instead (want).
func TestRules(t *testing.T) {
	tests := []struct {
		rule string
		src  string
		want []string // substrings of the messages, in order
	}{
		// Pointcut combination rules (ch. 4.2).
		{"access kind", advice("access(sk_buff.len, »wirte)"),
			[]string{`access kind "wirte" is none of read, write, rw, addr: write access(sk_buff.len, write); did you mean write?`}},
		{"AND-group without access or execution",
			advice("»within_file(sk_buff.c) AND within_function(skb_clone)"),
			[]string{"needs an access(...), an execution(...), a line(...), a block(...) or a tracepoint(...)"}},
		{"OR leaves an alternative without access (AND binds tighter)",
			advice("access(sk_buff.data) AND within_file(sk_buff.c) OR »within_file(dev.c)"),
			[]string{"needs an access(...), an execution(...), a line(...), a block(...) or a tracepoint(...)"}},
		{"access and execution never ANDed",
			advice("access(sk_buff.data) AND »execution(skb_clone)"),
			[]string{"access and execution cannot be joined by AND"}},
		{"execution not with local_var",
			advice("execution(skb_clone) AND »local_var(n, np)"),
			[]string{"local_var cannot be combined with execution"}},
		{"target only with access, not execution",
			advice("execution(vfs_read) AND »target(f)"),
			[]string{"target cannot be combined with execution: execution is joined by AND only with execution(...), argument(...), within_file(...) and within_function(...); to get a parameter write argument(PARAM, VAR)"}},
		{"target alone has no access",
			advice("»target(f)"),
			[]string{"needs an access(...), an execution(...), a line(...), a block(...) or a tracepoint(...)"}},
		{"argument only with execution",
			advice("access(sk_buff.data) AND »argument(size, sizep)"),
			[]string{"argument(...) needs an execution(...)"}},
		{"argument in an OR alternative without execution",
			advice("(access(sk_buff.len) OR execution(alloc_skb)) AND »argument(size, sizep)"),
			[]string{"argument(...) needs an execution(...)"}},
		// line(FILE:LINE) and block(FUNC) (issue 13).
		{"line with access",
			advice("access(sk_buff.data) AND »line(net/core/dev.c:10)"),
			[]string{"access and line cannot be joined by AND: no join point is both a member access and a source line's code"}},
		{"line with execution",
			advice("line(fs/namei.c:10) AND »execution(path_openat)"),
			[]string{"line and execution cannot be joined by AND: no join point is both a source line's code and a function's execution"}},
		{"block with line",
			advice("block(path_openat) AND »line(fs/namei.c:10)"),
			[]string{"block and line cannot be joined by AND"}},
		{"two lines ANDed",
			advice("line(fs/namei.c:10) AND »line(fs/namei.c:11)"),
			[]string{"line(...) cannot be joined by AND with another line(...): a join point is on one line; join them with OR"}},
		{"line not with within_file",
			advice("line(namei.c:10) AND »within_file(fs/namei.c)"),
			[]string{"within_file cannot be combined with line: line is joined by AND only with within_function(...), local_var(...) and argument(...); line(FILE:LINE) names its file already"}},
		{"line not with target",
			advice("line(fs/namei.c:10) AND »target(x)"),
			[]string{"target cannot be combined with line: line is joined by AND only with within_function(...), local_var(...) and argument(...); target(...) is the struct of an access(...): at a line bind locals with local_var(LOCAL, VAR)"}},
		{"block not with within_function",
			advice("block(path_openat) AND »within_function(do_filp_open)"),
			[]string{"within_function cannot be combined with block: block is joined by AND only with block(...), within_file(...), local_var(...) and argument(...); block(FUNCTION) names its function already"}},
		{"line number not a number",
			advice("line(fs/namei.c:»x10)"),
			[]string{`line number "x10" is not a number from 1 up`}},
		{"line number zero",
			advice("line(fs/namei.c:»0)"),
			[]string{`line number "0" is not a number from 1 up`}},
		{"line without a number",
			advice("line(fs/namei.c»)"),
			[]string{`unexpected token ")" (expected ":" and a line number); usage: line(FILE:LINE)`}},
		{"* in a line's file",
			advice("line(fs/»*.c:10)"),
			[]string{"`*` is not a wildcard in a pointcut; use `%` (line(fs/%.c:10))"}},
		{"* in a block's function",
			advice("block(path_»*)"),
			[]string{"`*` is not a wildcard in a pointcut; use `%` (block(path_%))"}},
		{"block with after advice",
			"<aspect>\n  <advice>\n    <pointcut>»block(path_openat)</pointcut>\n    <after>f();</after>\n  </advice>\n</aspect>\n",
			[]string{"block(...) selects the entries of basic blocks, which have no after: use <before> advice"}},
		{"tracepoint with after advice",
			"<aspect>\n  <advice>\n    <pointcut>»tracepoint(sched:sched_switch)</pointcut>\n    <after>f();</after>\n  </advice>\n</aspect>\n",
			[]string{"tracepoint(...) is an event, which has no after: use <before> advice"}},
		{"tracepoint narrowed by another designator",
			advice("tracepoint(sched:sched_switch) AND »within_function(schedule)"),
			[]string{"within_function cannot be combined with tracepoint: a tracepoint(...) stands alone in its AND-group"}},
		{"two tracepoints ANDed",
			advice("tracepoint(sched:sched_switch) AND »tracepoint(sched:sched_wakeup)"),
			[]string{"tracepoint(...) cannot be joined by AND with another tracepoint(...)"}},
		{"tracepoint and execution ANDed",
			advice("execution(vfs_read) AND »tracepoint(sched:sched_switch)"),
			[]string{"execution and tracepoint cannot be joined by AND"}},
		{"tracepoint with a wildcard",
			advice("tracepoint(sched:»sched_%)"),
			[]string{`tracepoint "sched_%" cannot contain the wildcard %`}},
		{"argument with line only in one alternative",
			advice("(line(fs/namei.c:10) OR access(a.b)) AND »argument(nd, ndp)"),
			[]string{"argument(...) needs an execution(...), a line(...) or a block(...)"}},
		{"variable bound twice",
			advice("access(sk_buff.data) AND target(s) AND local_var(skb, »s)"),
			[]string{"bound twice"}},
		// <replace>: the new body of one out-of-line function (issue 13).
		{"replace with OR",
			replaceAdvice("execution(ksys_lseek) OR »execution(ksys_read)", "return 0;"),
			[]string{"<replace> is the new body of one function, so its pointcut cannot join alternatives with OR"}},
		{"replace with OR inside parentheses",
			replaceAdvice("execution(ksys_lseek) AND (within_file(a.c) OR »within_file(b.c))", "return 0;"),
			[]string{"cannot join alternatives with OR"}},
		{"replace of a wildcard",
			replaceAdvice("execution(ksys_»%)", "return 0;"),
			[]string{"execution(ksys_%): <replace> replaces one function, so name it without the wildcard %"}},
		{"replace of two functions ANDed",
			replaceAdvice("execution(ksys_lseek) AND »execution(ksys_read)", "return 0;"),
			[]string{"<replace> replaces one function: its pointcut has one execution(FUNC), not 2"}},
		{"replace with within_function",
			replaceAdvice("execution(ksys_lseek) AND »within_function(__x64_sys_lseek)", "return 0;"),
			[]string{"within_function cannot be used in the pointcut of <replace>: it selects inlined copies"}},
		{"replace of member accesses",
			replaceAdvice("»access(sk_buff.len)", "return 0;"),
			[]string{"<replace> needs execution(FUNC)"}},
		{"replace with target",
			replaceAdvice("execution(ksys_lseek) AND »target(f)", "return 0;"),
			[]string{"target cannot be combined with execution"}},
		{"$retval$ in replace",
			replaceAdvice("execution(ksys_lseek)", "return »$retval$;"),
			[]string{"$retval$ is the value the original function returns, which never runs under <replace>"}},
		{"replace and before in one advice",
			"<aspect>\n  <advice><pointcut>execution(f)</pointcut><before>f();</before>»<replace>return 0;</replace></advice>\n</aspect>\n",
			[]string{"has both <before> and <replace>"}},
		{"replace outside an advice",
			"<aspect>\n  »<replace>return 0;</replace>\n  <advice><pointcut>execution(f)</pointcut><before>f();</before></advice>\n</aspect>\n",
			[]string{"unknown element <replace> in <aspect>: it holds <import>, <advice>, <xflow>; <replace> belongs in an <advice>"}},
		// Lexical rules.
		{"* is not a wildcard",
			advice("access(sk_buff.»*)"),
			[]string{"`*` is not a wildcard in a pointcut; use `%` (access(sk_buff.%))"}},
		{"* in an execution pattern",
			advice("execution(tcp_»*)"),
			[]string{"`*` is not a wildcard in a pointcut; use `%` (execution(tcp_%))"}},
		{"* in a structure pattern",
			advice("access(»*.len)"),
			[]string{"`*` is not a wildcard in a pointcut; use `%` (access(%.len))"}},
		{"* in a within_function pattern",
			advice("access(sk_buff.len) AND within_function(skb_»*)"),
			[]string{"`*` is not a wildcard in a pointcut; use `%` (within_function(skb_%))"}},
		{"* in a file pattern",
			advice("access(sk_buff.len) AND within_file(net/ipv4/ip_»*.c)"),
			[]string{"`*` is not a wildcard in a pointcut; use `%` (within_file(net/ipv4/ip_%.c))"}},
		{"wildcard in a variable name",
			advice("access(sk_buff.len) AND target(»s%)"),
			[]string{"cannot contain the wildcard %"}},
		{"blank inside a path",
			advice("access(sk_buff.len) AND within_file(net/core/ »dev.c)"),
			[]string{"blank inside the file pattern"}},
		{"unknown designator",
			advice("access(sk_buff.len) AND »cflow(foo)"),
			[]string{"unknown pointcut designator cflow: klasy knows execution, access"}},
		// Syntax, positions inside multi-line pointcuts with escapes.
		{"syntax error on a later line of a pointcut, after an entity",
			advice("access(sk_buff.len) AND\n      within_file(a.c)&#32;&#x20;&#9; »junk"),
			[]string{`unexpected token "junk"`}},
		{"entity-escaped && in a pointcut",
			advice("access(sk_buff.len) »&amp;&amp; target(s)"),
			[]string{"combine pointcuts with AND and OR, not && and ||"}},
		{"missing closing parenthesis",
			advice("access(sk_buff.len\n      »AND target(s)"),
			[]string{`unexpected token "AND" (expected ")"); usage: access(STRUCT.MEMBER)`}},
		{"missing AND between designators",
			advice("access(sk_buff.len) »target(s)"),
			[]string{`unexpected token "target" (expected AND, OR, ")" or the end of the pointcut)`}},
		{"OR with nothing after it",
			advice("access(sk_buff.len) OR»;"),
			[]string{`unexpected token ";" (expected a designator or "(")`}},
		{"empty within_file",
			advice("access(sk_buff.len) AND within_file(»)"),
			[]string{`unexpected token ")"; usage: within_file(PATH[@DOMAIN])`}},
		{"wrong argument count",
			advice("access(sk_buff.len) AND target(a»,b)"),
			[]string{"usage: target(VAR)"}},
		{"&& instead of AND",
			advice("access(sk_buff.len) »&& target(s)"),
			[]string{"bare '&' in XML text"}},
		{"AND at the start of a pointcut",
			advice("»AND access(sk_buff.len)"),
			[]string{`unexpected token "AND" (expected a designator or "(")`}},
		{"AND twice",
			advice("access(sk_buff.len) AND »AND target(s)"),
			[]string{`unexpected token "AND" (expected a designator or "(")`}},
		{"OR with nothing after it inside parentheses",
			advice("access(sk_buff.len) AND (target(s) »OR )"),
			[]string{"OR has nothing after it"}},
		{"non-ASCII character (a no-break space pasted from a PDF)",
			advice("access(sk_buff.len) AND»\u00a0target(s)"),
			[]string{`unexpected character "\u00a0" in pointcut`}},
		{"parentheses nested too deep (the parser would run out of stack)",
			advice(strings.Repeat("(", 100) + "»(access(a.b)" + strings.Repeat(")", 101)),
			[]string{"parentheses nested more than 100 deep"}},
		{"elements nested too deep",
			"<aspect>" + strings.Repeat("<x>", 63) + "»<x>" + strings.Repeat("</x>", 64) + "</aspect>\n",
			[]string{"elements nested more than 64 deep"}},
		{"lower-case and",
			advice("access(sk_buff.len) »and target(s)"),
			[]string{"written AND and OR in capitals"}},
		{"pointcut ends early",
			advice("access(sk_buff.len) AND within_function(f»"),
			[]string{`pointcut ends early (expected ")")`}},
		{"dangling AND (Figure 5.4 as extracted)",
			advice("\n      access(sk_buff.data) AND\n      within_function(alloc_skb_from_cache) »AND\n    "),
			[]string{"AND at the end of the pointcut has nothing after it"}},
		{"self-closed element with content after it (Figure 5.10 as extracted)",
			flowRules("    <transit><pointcut>access(a.b)</pointcut>\n      <xin_move name=\"n\" from=\"s\" to=\"t\"/>\n      <field name=\"flags\" offset=\"4\" size=\"12\"/>\n      »</xin_move>\n    </transit>\n"),
			[]string{"end tag </xin_move> does not match <transit> opened at line 3: the <xin_move .../> before it is self-closing"}},
		{"misspelt element",
			"<aspect>\n  »<advice><pointcut>access(a.b)</pointcut>»<befor>f();</befor></advice>\n</aspect>\n",
			[]string{"<advice> has no <before>, <after> or <replace>", "unknown element <befor> in <advice>: it holds <pointcut>, <before>, <after>, <replace>; did you mean <before>?"}},
		{"empty pointcut",
			advice("»  "),
			[]string{"empty pointcut"}},
		// xflow pointcut (ch. 5.2).
		{"xflow names an undefined flow",
			withFlow("access(sk_buff.%) AND target(skb) AND xflow(»diskflow, skb)"),
			[]string{"no xflow named diskflow is defined; defined flows: netflow"}},
		{"xflow variable not bound",
			withFlow("access(sk_buff.%) AND target(skb) AND xflow(netflow, »sk, id)"),
			[]string{"sk is not bound in this AND-group; bind it with target(sk) or local_var(LOCAL, sk)"}},
		{"xflow variable bound only in another alternative",
			withFlow("access(sk_buff.%) AND target(skb) OR access(sock.sk_rcvbuf) AND xflow(netflow, »skb)"),
			[]string{"skb is not bound in this AND-group"}},
		{"xflow variable bound by argument",
			withFlow("execution(kfree_skb) AND argument(skb, s) AND »xflow(netflow, »s)"),
			[]string{"xflow cannot be combined with execution", "s is not bound in this AND-group"}},
		{"flow name used as an advice variable",
			withFlow("access(sk_buff.%) AND target(netflow) AND xflow(»netflow, netflow)"),
			[]string{"flow name netflow is also an advice variable"}},
		{"flow ID variable clashes",
			withFlow("access(sk_buff.%) AND target(skb) AND xflow(netflow, skb, »skb)"),
			[]string{"already bound"}},
		{"two flow checks with one ID variable",
			withFlow("access(sk_buff.sk) AND target(s) AND local_var(sk, k) AND xflow(netflow, s, id) AND xflow(netflow, k, »id)"),
			[]string{"given by two xflow(...)"}},
		{"xflow inside a flow rule",
			flowRules("    <start><pointcut>access(sk_buff.data) AND target(s) AND »xflow(netflow, s)</pointcut></start>\n"),
			[]string{"xflow(...) cannot be used inside a flow definition"}},
		// Flow definitions (ch. 5.3).
		{"transit without move/copy/xin/xout",
			flowRules("    »<transit><pointcut>access(sk_buff.head) AND within_function(skb_clone)</pointcut></transit>\n"),
			[]string{"<transit> needs one of <move>, <copy>, <xin_move>, <xin_copy>, <xout_move>, <xout_copy>, <action>"}},
		{"transit with both move and copy",
			flowRules("    <transit><pointcut>access(sk_buff.head)</pointcut><move from=\"skb\" to=\"n\"/>»<copy from=\"skb\" to=\"n\"/></transit>\n"),
			[]string{"<transit> has both <move> and <copy>; it takes one of"}},
		{"move to itself",
			flowRules("    <transit><pointcut>access(sk_buff.head)</pointcut><move from=\"skb\" to=\"»skb\"/></transit>\n"),
			[]string{"from and to name the same variable"}},
		{"move variable already bound by the pointcut",
			flowRules("    <transit><pointcut>access(sk_buff.head) AND target(skb)</pointcut><move from=\"»skb\" to=\"n\"/></transit>\n"),
			[]string{`"skb" is already bound by target in the <transit>'s pointcut`}},
		{"move without to",
			flowRules("    <transit><pointcut>access(sk_buff.head)</pointcut>»<move from=\"skb\"/></transit>\n"),
			[]string{`<move> needs a to attribute: <move from="skb" to="n"/>`}},
		{"xout names no xin",
			flowRules("    <transit><pointcut>access(netif_tx_request.flags)</pointcut><xout_move name=\"»xennet\" from=\"txp\" to=\"skb\"/></transit>\n"),
			[]string{`names no <xin_move> or <xin_copy> of xflow netflow`}},
		{"xin without field",
			flowRules("    <transit><pointcut>access(netif_tx_request.flags)</pointcut>»<xin_move name=\"n\" from=\"skb\" to=\"tx\"></xin_move></transit>\n"),
			[]string{"needs at least one <field"}},
		{"field offset not a number",
			flowRules("    <transit><pointcut>access(netif_tx_request.flags)</pointcut><xin_copy name=\"n\" from=\"skb\" to=\"tx\"><field name=\"flags\" offset=\"»four\" size=\"12\"/></xin_copy></transit>\n"),
			[]string{"must be a whole number from 0 to 63"}},
		{"overlapping fields",
			flowRules("    <transit><pointcut>access(netif_tx_request.flags)</pointcut><xin_copy name=\"n\" from=\"skb\" to=\"tx\"><field name=\"flags\" offset=\"0\" size=\"8\"/>»<field name=\"flags\" offset=\"4\" size=\"8\"/></xin_copy></transit>\n"),
			[]string{"overlap another field"}},
		{"xin header type unknown",
			flowRules("    <transit><pointcut>access(%.flags)</pointcut>»<xin_copy name=\"n\" from=\"skb\" to=\"tx\"><field name=\"flags\" offset=\"0\" size=\"8\"/></xin_copy></transit>\n"),
			[]string{"must access exactly one structure, named without %"}},
		{"start on an execution pointcut without action",
			flowRules("    <start><pointcut>»execution(__alloc_skb)</pointcut></start>\n"),
			[]string{"must select member accesses with access(...)"}},
		{"select without local_var",
			flowRules("    <start><pointcut>access(sk_buff.data)</pointcut>»<select/></start>\n"),
			[]string{"<select> needs a local_var attribute"}},
		{"select and action together",
			flowRules("    <quit><pointcut>access(sk_buff.data)</pointcut><select local_var=\"d\"/>»<action>f();</action></quit>\n"),
			[]string{"has both <select> and <action>"}},
		{"flow defined twice",
			"<aspect>\n" + netflowDef + "  <xflow name=\"»netflow\">\n    <quit><pointcut>access(sk_buff.%)</pointcut></quit>\n  </xflow>\n</aspect>\n",
			[]string{"xflow \"netflow\" is defined twice"}},
		{"flow name not an identifier",
			"<aspect>\n  <xflow name=\"»net flow\">\n    <quit><pointcut>access(sk_buff.%)</pointcut></quit>\n  </xflow>\n</aspect>\n",
			[]string{"is not a C identifier"}},
		{"empty flow",
			"<aspect>\n  »<xflow name=\"netflow\"></xflow>\n</aspect>\n",
			[]string{"is empty"}},
		// Advice structure (ch. 4.2).
		{"advice without before or after",
			"<aspect>\n  »<advice><pointcut>access(sk_buff.data)</pointcut></advice>\n</aspect>\n",
			[]string{"<advice> has no <before>, <after> or <replace>"}},
		{"advice without pointcut",
			"<aspect>\n  »<advice><before>f();</before></advice>\n</aspect>\n",
			[]string{"<advice> has no <pointcut>"}},
		{"advice with before and after",
			"<aspect>\n  <advice><pointcut>access(sk_buff.data)</pointcut><before>f();</before>»<after>g();</after></advice>\n</aspect>\n",
			[]string{"has both <before> and <after>"}},
		{"two pointcuts",
			"<aspect>\n  <advice><pointcut>access(sk_buff.data)</pointcut>»<pointcut>access(sk_buff.len)</pointcut><before>f();</before></advice>\n</aspect>\n",
			[]string{"has a second <pointcut>"}},
		{"unknown element",
			"<aspect>\n  »<advice><pointcut>access(sk_buff.data)</pointcut>»<around>f();</around></advice>\n</aspect>\n",
			[]string{"<advice> has no <before>, <after> or <replace>", "unknown element <around> in <advice>: it holds <pointcut>, <before>, <after>, <replace>; klasy has no around advice"}},
		{"pointcut directly in aspect (Figure 5.15's typo)",
			"<aspect>\n  »<pointcut>access(a.b)</pointcut>\n  <advice><pointcut>access(a.b)</pointcut><before>f();</before></advice>\n</aspect>\n",
			[]string{"unknown element <pointcut> in <aspect>: it holds <import>, <advice>, <xflow>; a <pointcut> belongs in an <advice>"}},
		{"unknown attribute",
			flowRules("    <transit><pointcut>access(sk_buff.head)</pointcut><move from=\"skb\" to=\"n\" »via=\"x\"/></transit>\n"),
			[]string{"unknown attribute via on <move>: it takes from, to"}},
		{"attribute on an element that takes none",
			"<aspect>\n  <advice »name=\"x\"><pointcut>access(sk_buff.data)</pointcut><before>f();</before></advice>\n</aspect>\n",
			[]string{"unknown attribute name: <advice> takes no attributes"}},
		{"element inside a body",
			"<aspect>\n  <advice><pointcut>access(sk_buff.data)</pointcut><before>»<b>x</b></before></advice>\n</aspect>\n",
			[]string{"holds only text"}},
		{"text directly in aspect",
			"<aspect>\n  »printk(\"x\");\n  <advice><pointcut>execution(vfs_read)</pointcut><before>f();</before></advice>\n</aspect>\n",
			[]string{"is not allowed directly in <aspect>"}},
		{"import with angle brackets",
			"<aspect>\n  <import>»&lt;linux/fs.h&gt;</import>\n  <advice><pointcut>execution(vfs_read)</pointcut><before>f();</before></advice>\n</aspect>\n",
			[]string{"without <> or quotes"}},
		{"aspect with nothing to weave",
			"»<aspect>\n  <import>linux/fs.h</import>\n</aspect>\n",
			[]string{"<aspect> has no <advice> and no <xflow>: nothing to weave"}},
		{"pattern that is not an identifier",
			advice("execution(vfs»-read)"),
			[]string{`unexpected token "-"`}},
		{"pattern starting with a digit",
			advice("execution(»9p_read)"),
			[]string{`function pattern "9p_read" is not a C identifier with % wildcards`}},
		{"* in a variable name",
			advice("access(a.b) AND target(»*p)"),
			[]string{`advice variable "*p" cannot contain *`}},
		{"root is not aspect",
			"»<advice><pointcut>access(a.b)</pointcut><before>f();</before></advice>\n",
			[]string{"an aspect file starts with <aspect>"}},
		// XML layer.
		{"raw < in C code",
			"<aspect>\n  <advice><pointcut>access(sk_buff.len)</pointcut><before>if (a »< b) f();</before></advice>\n</aspect>\n",
			[]string{"write < as &lt; or wrap the code in <![CDATA["}},
		{"raw < before a letter in C code",
			"<aspect>\n  <advice><pointcut>access(sk_buff.len)</pointcut><before>for (i = 0; i <n»; i++) f();</before></advice>\n</aspect>\n",
			[]string{"malformed tag <n"}},
		{"unknown entity",
			"<aspect>\n  <advice><pointcut>access(sk_buff.len)</pointcut><before>»&nbsp;</before></advice>\n</aspect>\n",
			[]string{"unknown entity &nbsp;"}},
		{"bare &",
			"<aspect>\n  <advice><pointcut>access(sk_buff.len)</pointcut><before>f(»&x);</before></advice>\n</aspect>\n",
			[]string{"bare '&'"}},
		{"mismatched end tag",
			"<aspect>\n  <xflow name=\"f\"><transit><pointcut>access(a.b)</pointcut><xin_move name=\"n\" from=\"s\" to=\"t\"><field name=\"flags\" offset=\"4\" size=\"12\"/>»</xen_move></transit></xflow>\n</aspect>\n",
			[]string{"end tag </xen_move> does not match <xin_move> opened at line 2: there is no element <xen_move>; did you mean <xin_move>?"}},
		{"unclosed element",
			"<aspect>\n  <advice>\n»</aspect>\n",
			[]string{"end tag </aspect> does not match <advice>"}},
		{"empty file",
			"»",
			[]string{"empty aspect file"}},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			src, offs := unmark(tt.src)
			if len(offs) != len(tt.want) {
				t.Fatalf("test has %d marks for %d messages", len(offs), len(tt.want))
			}
			f := &File{Name: "x.klasy", lines: newLineIndex("x.klasy", []byte(src))}
			_, diags := Load("x.klasy", []byte(src))
			if len(diags) != len(tt.want) {
				t.Fatalf("got %d diagnostics, want %d:\n%v", len(diags), len(tt.want), diags)
			}
			for i, d := range diags {
				want := f.Position(offs[i])
				if d.Pos.Line != want.Line || d.Pos.Col != want.Col {
					t.Errorf("diagnostic %q at %d:%d, want %d:%d", d.Msg, d.Pos.Line, d.Pos.Col, want.Line, want.Col)
				}
				if !strings.Contains(d.Msg, tt.want[i]) {
					t.Errorf("message %q does not contain %q", d.Msg, tt.want[i])
				}
				if !strings.HasPrefix(d.String(), fmt.Sprintf("x.klasy:%d:%d: ", want.Line, want.Col)) {
					t.Errorf("printed %q, want FILE:LINE:COL: message", d.String())
				}
			}
		})
	}
}

func TestAllErrorsReported(t *testing.T) {
	src := `<aspect>
  <advice>
    <pointcut>within_file(a.c) OR access(x.*)</pointcut>
    <before>f();</before>
  </advice>
  <advice>
    <pointcut>execution(f) AND target(t)</pointcut>
  </advice>
  <bogus/>
</aspect>
`
	_, diags := Load("x.klasy", []byte(src))
	want := []string{
		"3:15: within_file(a.c): every AND-group",
		"3:44: `*` is not a wildcard in a pointcut; use `%` (access(x.%))",
		"6:3: <advice> has no <before>, <after> or <replace>",
		"7:32: target cannot be combined with execution",
		"9:3: unknown element <bogus> in <aspect>",
	}
	var got []string
	for _, d := range diags {
		got = append(got, fmt.Sprintf("%d:%d: %s", d.Pos.Line, d.Pos.Col, d.Msg))
	}
	if len(got) != len(want) {
		t.Fatalf("got %d diagnostics, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("diagnostic %d = %q, want prefix %q", i, got[i], want[i])
		}
	}
}

// TestValidPointcuts lists forms the language accepts, with the
// AND-groups each expands to (AND binds tighter than OR).
// bodyAdvice wraps a pointcut, a timing and a body into an aspect.
func bodyAdvice(pc, when, body string) string {
	return "<aspect>\n  <advice>\n    <pointcut>" + pc + "</pointcut>\n    <" + when + ">" + body + "</" + when + ">\n  </advice>\n</aspect>\n"
}

func TestContextVariables(t *testing.T) {
	tests := []struct {
		name, src string
		want      []string
	}{
		{"retval after execution", bodyAdvice("execution(vfs_read)", "after", "STORE_DATA($retval$);"), nil},
		{"pc anywhere", bodyAdvice("access(sk_buff.len)", "before", "STORE_DATA($pc$);"), nil},
		{"in a comment or a string", bodyAdvice("execution(vfs_read)", "before", `/* $retval$ */ pr_info("$retval$ %d", '$'); // $foo$`), nil},
		{"gcc's $ in identifiers", bodyAdvice("execution(vfs_read)", "before", "int a$b$c = 1;"), nil},
		{"retval before", bodyAdvice("execution(vfs_read)", "before", "STORE_DATA(»$retval$);"),
			[]string{"use it in <after> advice of an execution(...) pointcut, not in <before>"}},
		{"retval after an access", bodyAdvice("execution(vfs_read) OR access(sk_buff.len)", "after", "x = 1;\n  STORE_DATA(»$retval$);"),
			[]string{"this advice also runs after member accesses (access(sk_buff.len))"}},
		{"unknown", bodyAdvice("execution(vfs_read)", "before", "STORE_DATA(»$ret$);"),
			[]string{"unknown context variable $ret$"}},
		{"position through CDATA", bodyAdvice("execution(vfs_read)", "before", "<![CDATA[\n  if (a < b)\n    STORE_DATA(»$retval$);]]>"),
			[]string{"$retval$ is the value a function returns"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, offs := unmark(tt.src)
			_, diags := Load("x.klasy", []byte(src))
			if len(diags) != len(tt.want) {
				t.Fatalf("got %d diagnostics, want %d:\n%v", len(diags), len(tt.want), diags)
			}
			f := &File{Name: "x.klasy", lines: newLineIndex("x.klasy", []byte(src))}
			for i, d := range diags {
				want := f.Position(offs[i])
				if d.Pos.Line != want.Line || d.Pos.Col != want.Col {
					t.Errorf("diagnostic %q at %d:%d, want %d:%d", d.Msg, d.Pos.Line, d.Pos.Col, want.Line, want.Col)
				}
				if !strings.Contains(d.Msg, tt.want[i]) {
					t.Errorf("message %q does not contain %q", d.Msg, tt.want[i])
				}
			}
		})
	}
}

// TestAdviceBrackets: advice C is the inside of a function; a brace
// that would end that function (and let the rest of the body be code of
// its own, issue 21) or one left open is refused at its place, and so
// is a closer of the wrong kind. Brackets in comments and literals do
// not count, digraphs do.
func TestAdviceBrackets(t *testing.T) {
	tests := []struct {
		name, src string
		want      []string
	}{
		{"balanced", bodyAdvice("execution(vfs_read)", "before", "if (a[0]) { f(); }"), nil},
		{"in comments and literals", bodyAdvice("execution(vfs_read)", "before", `/* } */ pr_info("}{)(") ; f('}', '{', '\'', '\\'); // }`), nil},
		{"comment continued over a line", bodyAdvice("execution(vfs_read)", "before", "f(); // not code \\\n } still a comment"), nil},
		{"string continued over a line", bodyAdvice("execution(vfs_read)", "before", "pr_info(\"a \\\n } b\");"), nil},
		{"CDATA", bodyAdvice("execution(vfs_read)", "before", "<![CDATA[if (a < b) { f(); }]]>"), nil},
		{"escapes its function", bodyAdvice("execution(vfs_read)", "before", "f(); »} int evil(void){ return 0; }"),
			[]string{"`}` has no `{` to close in this advice: advice is the inside of a function, and cannot end it"}},
		{"escapes on a later line", bodyAdvice("execution(vfs_read)", "after", "if (x) {\n    f();\n  }\n  »}\n  static int evil(void) {\n"),
			[]string{"`}` has no `{` to close"}},
		{"digraph", bodyAdvice("execution(vfs_read)", "before", "f(); »%> int evil(void) &lt;% return 0; %>"),
			[]string{"`%>` has no `{` to close"}},
		{"unclosed", bodyAdvice("execution(vfs_read)", "before", "if (x) »{ f();"),
			[]string{"`{` is not closed in this advice"}},
		{"unclosed parenthesis", bodyAdvice("execution(vfs_read)", "before", "f»(1;"),
			[]string{"`(` is not closed"}},
		{"wrong closer", bodyAdvice("execution(vfs_read)", "before", "f(a»];"),
			[]string{"`]` closes the `(` at 4:14; balance the brackets"}},
		{"extra parenthesis", bodyAdvice("execution(vfs_read)", "before", "f(1)»);"),
			[]string{"`)` has no `(` to close"}},
		{"unclosed comment", bodyAdvice("execution(vfs_read)", "before", "f(); »/* and the rest"),
			[]string{"/* comment is not closed in this advice"}},
		{"replace", replaceAdvice("execution(vfs_read)", "return 0; »} int evil(void) { return 1;"),
			[]string{"`}` has no `{` to close"}},
		{"flow action", flowRules("    <start><pointcut>access(sk_buff.data) AND within_function(__alloc_skb)</pointcut><action>f(); »}</action></start>\n"),
			[]string{"`}` has no `{` to close"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, offs := unmark(tt.src)
			_, diags := Load("x.klasy", []byte(src))
			if len(diags) != len(tt.want) {
				t.Fatalf("got %d diagnostics, want %d:\n%v", len(diags), len(tt.want), diags)
			}
			f := &File{Name: "x.klasy", lines: newLineIndex("x.klasy", []byte(src))}
			for i, d := range diags {
				want := f.Position(offs[i])
				if d.Pos.Line != want.Line || d.Pos.Col != want.Col {
					t.Errorf("diagnostic %q at %d:%d, want %d:%d", d.Msg, d.Pos.Line, d.Pos.Col, want.Line, want.Col)
				}
				if !strings.Contains(d.Msg, tt.want[i]) {
					t.Errorf("message %q does not contain %q", d.Msg, tt.want[i])
				}
			}
		})
	}
}

func TestSpecials(t *testing.T) {
	got := Specials("a = $pc$ + $retval$; /* $x$ */ s = \"$y$\"; $$ b$c$")
	var names []string
	for _, s := range got {
		names = append(names, s.Name)
	}
	if strings.Join(names, ",") != "pc,retval" {
		t.Errorf("Specials = %v, want pc, retval", got)
	}
	if got[0].Off != 4 || got[0].End != 8 {
		t.Errorf("$pc$ at %d..%d, want 4..8", got[0].Off, got[0].End)
	}
}

func TestValidPointcuts(t *testing.T) {
	tests := []struct{ pc, groups string }{
		{"execution(check_free_space)", "execution(check_free_space)"},
		{"execution(check_free_space())", "execution(check_free_space())"},
		{"execution(vfs_%) AND argument(file, f)", "execution(vfs_%) AND argument(file, f)"},
		{"access(inode.i_uid) AND within_function(inode_change_ok) AND target(inode_value);",
			"access(inode.i_uid) AND within_function(inode_change_ok) AND target(inode_value)"},
		{"access(sk_buff.data) AND within_file(sk_buff.c) OR access(sk_buff.len)",
			"access(sk_buff.data) AND within_file(sk_buff.c) | access(sk_buff.len)"},
		{"access(sk_buff.%) AND (within_file(dev.c) OR within_file(net/ipv4/ip_%.c))",
			"access(sk_buff.%) AND within_file(dev.c) | access(sk_buff.%) AND within_file(net/ipv4/ip_%.c)"},
		{"access(sk_buff.%) AND access(%.data)", "access(sk_buff.%) AND access(%.data)"},
		{"access(netif_tx_request.flags) AND within_file(drivers/net/xen-netfront.c@linuxU)",
			"access(netif_tx_request.flags) AND within_file(drivers/net/xen-netfront.c@linuxU)"},
		{"access(%.%) AND within_function(netif_rx@linux0) AND local_var(skb, s)",
			"access(%.%) AND within_function(netif_rx@linux0) AND local_var(skb, s)"},
		{"((access(a.b)))", "access(a.b)"},
		{"execution(lookup_fast) AND within_file(fs/namei.c) AND argument(nd, ndp)",
			"execution(lookup_fast) AND within_file(fs/namei.c) AND argument(nd, ndp)"},
		{"execution(d_revalidate) AND within_function(lookup_fast)",
			"execution(d_revalidate) AND within_function(lookup_fast)"},
		{"line(fs/namei.c:3820)", "line(fs/namei.c:3820)"},
		{"line(%/namei.c:3820) AND within_function(path_openat) AND local_var(nd, ndp) AND argument(op, opp)",
			"line(%/namei.c:3820) AND within_function(path_openat) AND local_var(nd, ndp) AND argument(op, opp)"},
		{"line( fs/namei.c : 3820 ) OR line(include/linux/fs.h:12)", "line(fs/namei.c:3820) | line(include/linux/fs.h:12)"},
		{"block(path_openat) OR block(link_%) AND within_file(fs/namei.c) AND argument(nd, ndp)",
			"block(path_openat) | block(link_%) AND within_file(fs/namei.c) AND argument(nd, ndp)"},
		{"execution(line) OR execution(block)", "execution(line) | execution(block)"},
		{"access(sk_buff.len, write) AND within_file(net/%) OR access(file.f_pos ,read)",
			"access(sk_buff.len, write) AND within_file(net/%) | access(file.f_pos, read)"},
		{"\n  access(task_struct.se)\n  AND within_file(kernel/sched/core.c) ;\n", "access(task_struct.se) AND within_file(kernel/sched/core.c)"},
	}
	for _, tt := range tests {
		_, diags := Load("x.klasy", []byte(advice(tt.pc)))
		if len(diags) > 0 {
			t.Errorf("%q: %v", tt.pc, diags)
			continue
		}
		e, perr := parsePointcut(tt.pc)
		if perr != nil {
			t.Fatalf("%q: %s", tt.pc, perr.msg)
		}
		groups, _ := Groups(e)
		var gs []string
		for _, g := range groups {
			gs = append(gs, alternative(g))
		}
		if got := strings.Join(gs, " | "); got != tt.groups {
			t.Errorf("%q: groups\n got %s\nwant %s", tt.pc, got, tt.groups)
		}
	}
}

func TestTooManyGroups(t *testing.T) {
	pc := "access(a.b)"
	for i := 0; i < 11; i++ {
		pc += " AND (within_file(x.c) OR within_file(y.c))"
	}
	_, diags := Load("x.klasy", []byte(advice(pc)))
	if len(diags) != 1 || !strings.Contains(diags[0].Msg, "more than 1024 AND-groups") {
		t.Fatalf("got %v", diags)
	}
}

// write and read take the read-modify-writes, which do both.
func TestAccessSelects(t *testing.T) {
	for _, tt := range []struct {
		kind string
		want []string
	}{
		{"", []string{"read", "write", "rw", "addr"}},
		{"write", []string{"write", "rw"}},
		{"read", []string{"read", "rw"}},
		{"rw", []string{"rw"}},
		{"addr", []string{"addr"}},
	} {
		a := &Access{}
		if tt.kind != "" {
			a.Kind = &Name{Value: tt.kind}
		}
		var got []string
		for _, m := range AccessKinds {
			if a.Selects(m) {
				got = append(got, m)
			}
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("access(S.M, %s) selects %v, want %v", tt.kind, got, tt.want)
		}
	}
}
