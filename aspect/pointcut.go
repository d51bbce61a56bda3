package aspect

// The pointcut grammar. The structs below are the AST and, through their
// participle tags, the grammar itself:
//
//	pointcut   = or [";"]
//	or         = and {"OR" and}            (AND binds tighter than OR)
//	and        = term {"AND" term}
//	term       = "(" or ")" | designator
//	designator = execution(FUNC) | execution(FUNC()) | access(STRUCT.MEMBER)
//	           | within_file(PATH[@DOMAIN]) | within_function(FUNC[@DOMAIN])
//	           | target(VAR) | local_var(LOCAL, VAR) | argument(PARAM, VAR)
//	           | xflow(FLOW, VAR[, ID]) | line(PATH:N) | block(FUNC)
//	           | tracepoint(SUBSYS:NAME)
//
// Patterns use % as the wildcard. The parser only knows shapes; what may
// be combined with what is checked in check.go.

import (
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/alecthomas/participle/v2"
	"github.com/alecthomas/participle/v2/lexer"

	"github.com/klasy/klasy/pattern"
)

// Expr is a whole pointcut expression.
type Expr struct {
	Pos  lexer.Position
	Or   *Or  `parser:"@@"`
	Semi bool `parser:"@';'?"`
}

// Or is one or more AND-chains joined by OR.
type Or struct {
	Pos lexer.Position
	And []*And `parser:"@@ ( 'OR' @@ )*"`
}

// And is one or more terms joined by AND.
type And struct {
	Pos   lexer.Position
	Terms []*Term `parser:"@@ ( 'AND' @@ )*"`
}

// Term is one designator or a parenthesized expression. The designator
// keywords are matched here, before the designator's struct, so that
// trying the alternatives in turn allocates little; the most common
// designators come first for the same reason.
type Term struct {
	Pos            lexer.Position
	Access         *Access         `parser:"  'access' '(' @@ ')'"`
	Target         *Target         `parser:"| 'target' '(' @@ ')'"`
	WithinFunction *WithinFunction `parser:"| 'within_function' '(' @@ ')'"`
	WithinFile     *WithinFile     `parser:"| 'within_file' '(' @@ ')'"`
	LocalVar       *LocalVar       `parser:"| 'local_var' '(' @@ ')'"`
	Execution      *Execution      `parser:"| 'execution' '(' @@ ')'"`
	Argument       *Argument       `parser:"| 'argument' '(' @@ ')'"`
	Xflow          *XflowPC        `parser:"| 'xflow' '(' @@ ')'"`
	Line           *LinePC         `parser:"| 'line' '(' @@ ')'"`
	Block          *Block          `parser:"| 'block' '(' @@ ')'"`
	Tracepoint     *TracepointPC   `parser:"| 'tracepoint' '(' @@ ')'"`
	Group          *Or             `parser:"| '(' @@ ')'"`
	Unknown        *Unknown        `parser:"| @@"`
}

// Name is one word: an identifier or a pattern with % wildcards.
type Name struct {
	Pos   lexer.Position
	Value string `parser:"@Word"`
}

// Pattern compiles the name as a pointcut pattern (% is the wildcard, *
// an error): the function of execution(...) and within_function(...),
// the structure and member of access(...).
func (n *Name) Pattern() (*pattern.Pattern, error) {
	return pattern.Compile(n.Value, pattern.Pointcut)
}

// Execution selects function executions: execution(f) or execution(f()).
type Execution struct {
	Pos    lexer.Position
	Func   *Name `parser:"@@"`
	Parens bool  `parser:"( @'(' ')' )?"`
}

// Access selects reads and writes of STRUCT.MEMBER, or with Kind only
// the accesses of one kind (AccessKinds): access(sk_buff.len, write).
type Access struct {
	Pos    lexer.Position
	Struct *Name `parser:"@@ '.'"`
	Member *Name `parser:"@@"`
	Kind   *Name `parser:"( ',' @@ )?"`
}

// AccessKinds are access(S.M, KIND)'s kinds, as klasy list names a
// join point's: write and read take the read-modify-writes (x += y)
// too, which do both.
var AccessKinds = []string{"read", "write", "rw", "addr"}

// Selects reports whether an access of mode ("read", "write", "rw" or
// "addr") is one a selects.
func (a *Access) Selects(mode string) bool {
	if a.Kind == nil {
		return true
	}
	k := a.Kind.Value
	return k == mode || mode == "rw" && (k == "read" || k == "write")
}

// LinePC selects the code of one source line, line(fs/namei.c:3820):
// its is_stmt addresses in every out-of-line body and inlined copy.
// Path is a file pattern as within_file's; Num is the line number,
// checked to be one by the checker.
type LinePC struct {
	Pos  lexer.Position
	Path *Path `parser:"@@ ':'"`
	Num  *Name `parser:"@@"`
}

// Block selects the entry of every basic block of the out-of-line
// bodies of the functions Func matches.
type Block struct {
	Pos  lexer.Position
	Func *Name `parser:"@@"`
}

// TracepointPC selects one of the kernel's static tracepoints by its
// subsystem and event name, as tracefs names them:
// tracepoint(sched:sched_switch). Its advice gets the event's arguments
// (TP_PROTO) by their names.
type TracepointPC struct {
	Pos    lexer.Position
	Subsys *Name `parser:"@@ ':'"`
	Event  *Name `parser:"@@"`
}

// Path is a file name pattern such as net/ipv4/ip_%.c. Its tokens are
// kept so that the checker can reject blanks inside it.
type Path struct {
	Pos    lexer.Position
	Parts  []string `parser:"@( Word | '.' | '/' | '-' | '+' | '~' )+"`
	Tokens []lexer.Token
}

// WithinFile limits join points to files matching a path, optionally in
// one Xen domain: within_file(netfront.c@linuxU).
type WithinFile struct {
	Pos    lexer.Position
	Path   *Path `parser:"@@"`
	Domain *Name `parser:"( '@' @@ )?"`
}

// WithinFunction limits join points to function bodies.
type WithinFunction struct {
	Pos    lexer.Position
	Func   *Name `parser:"@@"`
	Domain *Name `parser:"( '@' @@ )?"`
}

// Target binds the accessed structure to an advice variable.
type Target struct {
	Pos lexer.Position
	Var *Name `parser:"@@"`
}

// LocalVar binds a pointer to a local variable at the join point.
type LocalVar struct {
	Pos   lexer.Position
	Local *Name `parser:"@@ ','"`
	Var   *Name `parser:"@@"`
}

// Argument binds a pointer to a parameter of an executed function.
type Argument struct {
	Pos   lexer.Position
	Param *Name `parser:"@@ ','"`
	Var   *Name `parser:"@@"`
}

// XflowPC selects join points where the structure in Var belongs to
// flow Flow; ID, if given, names a variable holding the flow ID.
type XflowPC struct {
	Pos  lexer.Position
	Flow *Name `parser:"@@ ','"`
	Var  *Name `parser:"@@"`
	ID   *Name `parser:"( ',' @@ )?"`
}

// Unknown is a call of a designator klasy does not know, parsed so the
// checker can name the ones it does know.
type Unknown struct {
	Pos  lexer.Position
	Name string   `parser:"@Word '('"`
	Args []string `parser:"@( ~')' )* ')'"`
}

// pointcutLexer splits a pointcut into Whitespace, Word (letters,
// digits, _, % and * so that the checker can say "use %"), Op (the
// reserved words AND and OR, so that a misplaced operator is reported
// at itself rather than taken for a designator's name) and Punct
// tokens. It is written by hand because the regexp-based lexer took a
// quarter of the time klasy check spends on a large aspect.
var pointcutLexer = &pcLexerDef{}

const (
	tokWhitespace lexer.TokenType = -(iota + 2)
	tokWord
	tokOp
	tokPunct
)

type pcLexerDef struct{}

func (*pcLexerDef) Symbols() map[string]lexer.TokenType {
	return map[string]lexer.TokenType{"EOF": lexer.EOF, "Whitespace": tokWhitespace, "Word": tokWord, "Op": tokOp, "Punct": tokPunct}
}

func (d *pcLexerDef) Lex(filename string, r io.Reader) (lexer.Lexer, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	return d.LexString(filename, string(b))
}

func (*pcLexerDef) LexString(filename string, s string) (lexer.Lexer, error) {
	return &pcLexer{s: s}, nil
}

type pcLexer struct {
	s string
	i int
}

func (l *pcLexer) Next() (lexer.Token, error) {
	start := l.i
	pos := lexer.Position{Offset: start, Line: 1, Column: start + 1}
	if start >= len(l.s) {
		return lexer.Token{Type: lexer.EOF, Pos: pos}, nil
	}
	c := l.s[start]
	var typ lexer.TokenType
	switch {
	case c == ' ' || c == '\t' || c == '\r' || c == '\n':
		for l.i < len(l.s) && (l.s[l.i] == ' ' || l.s[l.i] == '\t' || l.s[l.i] == '\r' || l.s[l.i] == '\n') {
			l.i++
		}
		typ = tokWhitespace
	case isWordByte(c):
		for l.i < len(l.s) && isWordByte(l.s[l.i]) {
			l.i++
		}
		typ = tokWord
		if w := l.s[start:l.i]; w == "AND" || w == "OR" {
			typ = tokOp
		}
	case strings.IndexByte("().,;:@/-+~", c) >= 0:
		l.i++
		typ = tokPunct
	default:
		return lexer.Token{}, &lexer.Error{Pos: pos, Msg: fmt.Sprintf("invalid input text %q", l.s[start:min(len(l.s), start+10)])}
	}
	return lexer.Token{Type: typ, Value: l.s[start:l.i], Pos: pos}, nil
}

// pointcutParser is built on first use, not at start-up: every klasy
// command links this package, and most (lines, vars, lab...) never parse
// a pointcut.
var pointcutParser = sync.OnceValue(func() *participle.Parser[Expr] {
	return participle.MustBuild[Expr](
		participle.Lexer(pointcutLexer),
		participle.Elide("Whitespace"),
	)
})

// Designators lists the pointcut designators with their usage, for
// error messages and help texts.
var Designators = []struct{ Name, Usage string }{
	{"execution", "execution(FUNCTION), e.g. execution(vfs_read) or execution(vfs_read())"},
	{"access", "access(STRUCT.MEMBER), e.g. access(sk_buff.data) or access(sk_buff.%)"},
	{"within_file", "within_file(PATH[@DOMAIN]), e.g. within_file(net/core/dev.c)"},
	{"within_function", "within_function(FUNCTION[@DOMAIN]), e.g. within_function(skb_%)"},
	{"target", "target(VAR), e.g. target(skb)"},
	{"local_var", "local_var(LOCAL, VAR), e.g. local_var(n, np)"},
	{"argument", "argument(PARAM, VAR), e.g. argument(size, sizep)"},
	{"xflow", "xflow(FLOW, VAR[, ID]), e.g. xflow(netflow, skb, id)"},
	{"line", "line(FILE:LINE), e.g. line(fs/namei.c:3820) or line(%/namei.c:3820)"},
	{"block", "block(FUNCTION), e.g. block(path_openat)"},
	{"tracepoint", "tracepoint(SUBSYS:NAME), e.g. tracepoint(sched:sched_switch)"},
}

func designatorUsage(name string) string {
	for _, d := range Designators {
		if d.Name == name {
			return d.Usage
		}
	}
	return ""
}

// Pointcut is a parsed pointcut with the text it came from.
type Pointcut struct {
	Expr *Expr
	Text Text
}

// pointcutError is a parse error at a byte offset into the pointcut text.
type pointcutError struct {
	off int
	msg string
}

// maxParenDepth bounds the nesting of parentheses in a pointcut.
const maxParenDepth = 100

// parsePointcut parses text. Errors carry offsets into text.S.
func parsePointcut(text string) (*Expr, *pointcutError) {
	if strings.TrimSpace(text) == "" {
		return nil, &pointcutError{off: 0, msg: "empty pointcut: write one such as access(sk_buff.data) AND within_function(skb_clone), or execution(vfs_read)"}
	}
	if len(text) > MaxPointcut {
		// Refused before parsing: the parser's memory grows with the
		// tokens, to gigabytes for a pointcut of megabytes.
		return nil, &pointcutError{off: len(text) - len(strings.TrimLeft(text, " \t\r\n")),
			msg: fmt.Sprintf("pointcut of %d bytes is longer than the %d KiB limit: split it into several <advice>", len(text), MaxPointcut>>10)}
	}
	// The parser follows parentheses by recursion; bound them so that a
	// crafted pointcut cannot exhaust the stack.
	depth := 0
	for i := 0; i < len(text); i++ {
		switch text[i] {
		case '(':
			if depth++; depth > maxParenDepth {
				return nil, &pointcutError{off: i, msg: fmt.Sprintf("parentheses nested more than %d deep: write the pointcut with fewer", maxParenDepth)}
			}
		case ')':
			depth--
		}
	}
	expr, err := pointcutParser().ParseString("", text)
	if err == nil {
		return expr, nil
	}
	perr, ok := err.(participle.Error)
	if !ok {
		return nil, &pointcutError{off: 0, msg: "pointcut: " + err.Error()}
	}
	return nil, explainParseError(text, perr)
}

// grammarExpect matches participle's "(expected ...)" when it names a
// grammar type rather than tokens.
var grammarExpect = regexp.MustCompile(`\(expected [^)]*\b(?:Or|And|Term|Execution|Access|WithinFile|WithinFunction|Target|LocalVar|Argument|XflowPC|LinePC|Block|TracepointPC|Unknown|Name|Path)\b.*$`)

// explainParseError rewrites participle's message so that it says what
// would be accepted at that place.
func explainParseError(text string, perr participle.Error) *pointcutError {
	off := perr.Position().Offset
	if off > len(text) {
		off = len(text)
	}
	msg := perr.Message()
	// participle names grammar nodes; say it in the language's terms.
	msg = strings.ReplaceAll(msg, `(expected "(" ~")"* ")")`, `(expected "(" after a designator name)`)
	msg = strings.ReplaceAll(msg, `(expected Term)`, `(expected a designator or "(")`)
	msg = strings.ReplaceAll(msg, `(expected ":" Name)`, `(expected ":" and a line number)`)
	msg = strings.NewReplacer(" Name)", " NAME)", "(expected Name)", "(expected a NAME)", "(expected Path)", "(expected a PATH)").Replace(msg)
	// Other expectations name Go types of the grammar (WithinFile, And):
	// drop them; the usage hint below says it better.
	hadExpect := strings.Contains(msg, "(expected")
	if m := grammarExpect.FindStringIndex(msg); m != nil {
		exp := msg[m[0]:]
		msg = strings.TrimRight(msg[:m[0]], " ")
		if strings.HasPrefix(exp, "(expected And") || strings.HasPrefix(exp, "(expected Term") {
			msg += ` (expected a designator or "(")`
		}
	}
	if !hadExpect && strings.HasPrefix(msg, "unexpected token") && enclosingDesignator(text, off) == "" {
		msg += ` (expected AND, OR, ")" or the end of the pointcut)`
	}
	if ute, ok := perr.(*participle.UnexpectedTokenError); ok {
		tok := ute.Unexpected
		if tok.EOF() {
			off = len(strings.TrimRight(text, " \t\r\n"))
			full := msg
			msg = "pointcut ends early"
			if strings.Contains(full, "expected") {
				msg += strings.TrimPrefix(full, fmt.Sprintf("unexpected token %q", tok))
			}
			// A dangling operator is the token to point at.
			for _, op := range []string{"AND", "OR"} {
				if i := off - len(op); i >= 0 && text[i:off] == op && (i == 0 || !isWordByte(text[i-1])) {
					off = i
					msg = op + " at the end of the pointcut has nothing after it: remove it or add a designator"
				}
			}
		}
		if tok.Type == tokOp && enclosingDesignator(text, off) == "" {
			// An operator where a designator should be: first in the
			// pointcut or a group, after another operator, or last.
			if rest := strings.TrimLeft(text[off+len(tok.Value):], " \t\r\n"); rest == "" || rest[0] == ')' || rest[0] == ';' {
				msg = tok.Value + " has nothing after it: remove it or add a designator"
			} else {
				msg = fmt.Sprintf(`unexpected token %q (expected a designator or "(")`, tok.Value)
			}
		}
		if tok.Value == "and" || tok.Value == "or" || tok.Value == "And" || tok.Value == "Or" {
			msg += "; the operators are written AND and OR in capitals"
		}
	} else if strings.Contains(msg, "invalid input text") {
		c := ""
		if off < len(text) {
			r, n := utf8.DecodeRuneInString(text[off:])
			c = text[off : off+n]
			if r == utf8.RuneError {
				c = text[off : off+1]
			}
		}
		switch c {
		case "&", "|":
			msg = fmt.Sprintf("unexpected %q: combine pointcuts with AND and OR, not && and ||", c)
		case "!":
			msg = "unexpected \"!\": pointcuts have no negation; list what to select with AND and OR"
		default:
			msg = fmt.Sprintf("unexpected character %q in pointcut: names are letters, digits, _ and the wildcard %%", c)
		}
		return &pointcutError{off: off, msg: msg}
	}
	if d := enclosingDesignator(text, off); d != "" {
		msg += "; usage: " + designatorUsage(d)
	} else if !strings.Contains(msg, "capitals") && !strings.Contains(msg, "has nothing after it") {
		msg += "; a pointcut is designators such as access(sk_buff.data) joined by AND and OR, with optional parentheses and a final ;"
	}
	return &pointcutError{off: off, msg: msg}
}

// enclosingDesignator finds the designator whose argument list contains
// off, by scanning back for NAME( with no ) in between.
func enclosingDesignator(text string, off int) string {
	depth := 0
	for i := min(off, len(text)) - 1; i >= 0; i-- {
		switch text[i] {
		case ')':
			depth++
		case '(':
			if depth > 0 {
				depth--
				continue
			}
			j := i
			for j > 0 && (text[j-1] == ' ' || text[j-1] == '\t' || text[j-1] == '\n' || text[j-1] == '\r') {
				j--
			}
			k := j
			for k > 0 && isWordByte(text[k-1]) {
				k--
			}
			if name := text[k:j]; designatorUsage(name) != "" {
				return name
			}
			if k < j {
				return "" // inside execution(f( ... or an unknown name
			}
		}
	}
	return ""
}

func isWordByte(c byte) bool {
	return c == '_' || c == '%' || c == '*' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// Designator returns the name of the designator in t, or "" for a group.
func (t *Term) Designator() string {
	switch {
	case t.Execution != nil:
		return "execution"
	case t.Access != nil:
		return "access"
	case t.WithinFile != nil:
		return "within_file"
	case t.WithinFunction != nil:
		return "within_function"
	case t.Target != nil:
		return "target"
	case t.LocalVar != nil:
		return "local_var"
	case t.Argument != nil:
		return "argument"
	case t.Xflow != nil:
		return "xflow"
	case t.Line != nil:
		return "line"
	case t.Block != nil:
		return "block"
	case t.Tracepoint != nil:
		return "tracepoint"
	case t.Unknown != nil:
		return t.Unknown.Name
	}
	return ""
}

// String prints the expression in canonical form: one space around AND
// and OR, parentheses only where the input had them, no final ;.
func (e *Expr) String() string {
	var b strings.Builder
	e.Or.write(&b)
	return b.String()
}

func (o *Or) write(b *strings.Builder) {
	for i, a := range o.And {
		if i > 0 {
			b.WriteString(" OR ")
		}
		a.write(b)
	}
}

func (a *And) write(b *strings.Builder) {
	for i, t := range a.Terms {
		if i > 0 {
			b.WriteString(" AND ")
		}
		t.write(b)
	}
}

func (t *Term) write(b *strings.Builder) {
	switch {
	case t.Group != nil:
		b.WriteByte('(')
		t.Group.write(b)
		b.WriteByte(')')
	case t.Execution != nil:
		b.WriteString("execution(" + t.Execution.Func.Value)
		if t.Execution.Parens {
			b.WriteString("()")
		}
		b.WriteByte(')')
	case t.Access != nil:
		b.WriteString("access(" + t.Access.Struct.Value + "." + t.Access.Member.Value)
		if t.Access.Kind != nil {
			b.WriteString(", " + t.Access.Kind.Value)
		}
		b.WriteByte(')')
	case t.WithinFile != nil:
		b.WriteString("within_file(" + strings.Join(t.WithinFile.Path.Parts, ""))
		if t.WithinFile.Domain != nil {
			b.WriteString("@" + t.WithinFile.Domain.Value)
		}
		b.WriteByte(')')
	case t.WithinFunction != nil:
		b.WriteString("within_function(" + t.WithinFunction.Func.Value)
		if t.WithinFunction.Domain != nil {
			b.WriteString("@" + t.WithinFunction.Domain.Value)
		}
		b.WriteByte(')')
	case t.Target != nil:
		b.WriteString("target(" + t.Target.Var.Value + ")")
	case t.LocalVar != nil:
		b.WriteString("local_var(" + t.LocalVar.Local.Value + ", " + t.LocalVar.Var.Value + ")")
	case t.Argument != nil:
		b.WriteString("argument(" + t.Argument.Param.Value + ", " + t.Argument.Var.Value + ")")
	case t.Xflow != nil:
		b.WriteString("xflow(" + t.Xflow.Flow.Value + ", " + t.Xflow.Var.Value)
		if t.Xflow.ID != nil {
			b.WriteString(", " + t.Xflow.ID.Value)
		}
		b.WriteByte(')')
	case t.Line != nil:
		b.WriteString("line(" + strings.Join(t.Line.Path.Parts, "") + ":" + t.Line.Num.Value + ")")
	case t.Block != nil:
		b.WriteString("block(" + t.Block.Func.Value + ")")
	case t.Tracepoint != nil:
		b.WriteString("tracepoint(" + t.Tracepoint.Subsys.Value + ":" + t.Tracepoint.Event.Value + ")")
	case t.Unknown != nil:
		b.WriteString(t.Unknown.Name + "(" + strings.Join(t.Unknown.Args, " ") + ")")
	}
}

// ParsePointcut parses a pointcut that does not come from a file, e.g.
// one built by the xflow translation.
func ParsePointcut(s string) (*Pointcut, error) {
	e, err := parsePointcut(s)
	if err != nil {
		return nil, fmt.Errorf("parsing pointcut %q: at byte %d: %s", s, err.off, err.msg)
	}
	return &Pointcut{Expr: e, Text: PlainText(s)}, nil
}
