package aspect

import (
	"bytes"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/klasy/klasy/aspect/xmlscan"
)

// Text is character data decoded from the aspect file, with the file
// offset of every decoded byte so that positions inside it (a pointcut
// token, later a C compiler error in an advice body) map back to the file
// (xmlscan.Text).
type Text = xmlscan.Text

// PlainText makes a Text that does not come from a file (generated code).
func PlainText(s string) Text { return xmlscan.PlainText(s) }

// File is a parsed aspect file: <aspect> with its imports, advice and
// xflow definitions.
type File struct {
	Name string
	// Comment, if set, is printed by Format as an XML comment before
	// <aspect> (translations say what they were made from).
	Comment string
	Imports []*Import
	Advice  []*Advice
	Flows   []*Flow
	lines   *lineIndex
}

// Import is <import>linux/fs.h</import>.
type Import struct {
	Off    int
	Header string
}

// Advice is <advice>: a pointcut and a before, after or replace body.
type Advice struct {
	Off      int
	Pointcut *Pointcut
	When     string // "before", "after" or "replace"
	Body     Text
}

// Replace is Advice.When of a <replace>: the body is the selected
// function's new body, which runs instead of the original and returns
// the function's value.
const Replace = "replace"

// Flow is an <xflow name="..."> definition.
type Flow struct {
	Off     int
	Name    string
	NameOff int
	Rules   []*Rule
}

// RuleKind says which element a flow rule is.
type RuleKind string

const (
	Start   RuleKind = "start"
	Transit RuleKind = "transit"
	Quit    RuleKind = "quit"
)

// Rule is a <start>, <transit> or <quit> of a flow.
type Rule struct {
	Off      int
	Kind     RuleKind
	Pointcut *Pointcut
	Select   *Select // start and quit: the variable holding the structure
	Action   *Text   // hand-written registration code instead of the default
	Pass     *Pass   // transit: how the flow ID passes on
}

// Select is <select local_var="data"/>.
type Select struct {
	Off      int
	LocalVar Attr
}

// PassKind is the element that says how a transit passes a flow ID.
type PassKind string

const (
	Move     PassKind = "move"
	Copy     PassKind = "copy"
	XinMove  PassKind = "xin_move"
	XinCopy  PassKind = "xin_copy"
	XoutMove PassKind = "xout_move"
	XoutCopy PassKind = "xout_copy"
)

// Removes reports whether the source keeps its flow ID after the pass.
func (k PassKind) Removes() bool { return k == Move || k == XinMove || k == XoutMove }

// Pass is <move>, <copy>, <xin_*> or <xout_*> inside a <transit>.
type Pass struct {
	Off    int
	Kind   PassKind
	Name   Attr // xin_* and xout_*: the channel name shared by both ends
	From   Attr
	To     Attr
	Fields []*Field // xin_* only
}

// Field is a bit field of a header carrying flow ID bits across domains.
type Field struct {
	Off    int
	Member Attr
	Offset int
	Size   int
}

// Attr is an attribute value with the offset of its first character.
type Attr struct {
	Value string
	Off   int
}

// Derived returns an empty aspect named like f whose offsets are f's
// (a translation of f, whose parts point into f's text): Position gives
// f's lines and columns.
func (f *File) Derived() *File { return &File{Name: f.Name, lines: f.lines} }

// Position converts a byte offset into this file to a position.
func (f *File) Position(off int) Position {
	if f.lines == nil {
		return Position{Filename: f.Name, Offset: off, Line: 1, Col: off + 1}
	}
	return f.lines.pos(off)
}

type builder struct {
	f     *File
	diags Diagnostics
	jobs  []pointcutJob
}

// pointcutJob is a <pointcut> whose text is parsed after the XML walk,
// all of them in parallel: parsing pointcuts is most of klasy check's
// time on a large aspect.
type pointcutJob struct {
	text Text
	dst  **Pointcut
}

func (b *builder) errf(off int, format string, args ...any) {
	b.diags = append(b.diags, Diagnostic{Pos: b.f.Position(off), Msg: fmt.Sprintf(format, args...)})
}

// contentModel says, per element, which children and attributes it may
// have and whether it holds text (C code, a header name, a pointcut).
var contentModel = map[string]struct {
	children []string
	attrs    []string
	text     bool
}{
	"aspect":    {children: []string{"import", "advice", "xflow"}},
	"import":    {text: true},
	"advice":    {children: []string{"pointcut", "before", "after", "replace"}},
	"pointcut":  {text: true},
	"before":    {text: true},
	"after":     {text: true},
	"replace":   {text: true},
	"xflow":     {children: []string{"start", "transit", "quit"}, attrs: []string{"name"}},
	"start":     {children: []string{"pointcut", "select", "action"}},
	"quit":      {children: []string{"pointcut", "select", "action"}},
	"transit":   {children: []string{"pointcut", "move", "copy", "xin_move", "xin_copy", "xout_move", "xout_copy", "action"}},
	"select":    {attrs: []string{"local_var"}},
	"action":    {text: true},
	"move":      {attrs: []string{"from", "to"}},
	"copy":      {attrs: []string{"from", "to"}},
	"xin_move":  {children: []string{"field"}, attrs: []string{"name", "from", "to"}},
	"xin_copy":  {children: []string{"field"}, attrs: []string{"name", "from", "to"}},
	"xout_move": {attrs: []string{"name", "from", "to"}},
	"xout_copy": {attrs: []string{"name", "from", "to"}},
	"field":     {attrs: []string{"name", "offset", "size"}},
}

// misplaced adds a hint for elements that exist but sit elsewhere, or
// that users of other AOP systems expect.
var misplaced = map[string]string{
	"pointcut":  "; a <pointcut> belongs in an <advice>, <start>, <transit> or <quit>",
	"before":    "; <before> belongs in an <advice>",
	"after":     "; <after> belongs in an <advice>",
	"replace":   "; <replace> belongs in an <advice>",
	"around":    "; klasy has no around advice (dissertation ch. 4.2): use <before> or <after>, or <replace> for a function's new body",
	"advice":    "; <advice> belongs directly in <aspect>",
	"field":     "; <field> belongs in an <xin_move> or <xin_copy>",
	"select":    "; <select> belongs in a <start> or <quit>",
	"action":    "; <action> belongs in a <start>, <transit> or <quit>",
	"move":      "; <move> belongs in a <transit>",
	"copy":      "; <copy> belongs in a <transit>",
	"xin_move":  "; <xin_move> belongs in a <transit>",
	"xin_copy":  "; <xin_copy> belongs in a <transit>",
	"xout_move": "; <xout_move> belongs in a <transit>",
	"xout_copy": "; <xout_copy> belongs in a <transit>",
	"start":     "; <start> belongs in an <xflow name=\"...\">",
	"transit":   "; <transit> belongs in an <xflow name=\"...\">",
	"quit":      "; <quit> belongs in an <xflow name=\"...\">",
}

func tags(names []string) string {
	var s []string
	for _, n := range names {
		s = append(s, "<"+n+">")
	}
	return strings.Join(s, ", ")
}

// endTagHint explains the two usual causes of a mismatched end tag: the
// element was written self-closing (<xin_move .../>) before its content,
// or its name is misspelt.
func endTagHint(open *xmlscan.Node, name string) string {
	for _, c := range open.Children {
		if c.Name == name && c.SelfEnd {
			return fmt.Sprintf(": the <%s .../> before it is self-closing; write <%s ...> without the / to put content inside it", name, name)
		}
	}
	if known := similarElement(name); known != "" {
		return fmt.Sprintf(": there is no element <%s>; did you mean <%s>?", name, known)
	}
	return ""
}

// similarElement returns a known element name one edit (a letter
// changed, added or dropped) away from name, if any.
func similarElement(name string) string {
	if _, ok := contentModel[name]; ok {
		return ""
	}
	best := ""
	for known := range contentModel {
		if oneEdit(known, name) && (best == "" || known < best) {
			best = known
		}
	}
	return best
}

func oneEdit(a, b string) bool {
	if len(a) < len(b) {
		a, b = b, a
	}
	if len(a)-len(b) > 1 {
		return false
	}
	i := 0
	for i < len(b) && a[i] == b[i] {
		i++
	}
	if i == len(b) {
		return len(a) != len(b)
	}
	if len(a) == len(b) {
		return a[i+1:] == b[i+1:]
	}
	return a[i+1:] == b[i:]
}

// checkShape reports unknown attributes, unknown children and stray text
// in n, and returns the attribute values by name.
func (b *builder) checkShape(n *xmlscan.Node) map[string]Attr {
	m := contentModel[n.Name]
	attrs := map[string]Attr{}
	for _, a := range n.Attrs {
		known := false
		for _, k := range m.attrs {
			known = known || k == a.Name
		}
		if !known {
			if len(m.attrs) == 0 {
				b.errf(a.NameOff, "unknown attribute %s: <%s> takes no attributes", a.Name, n.Name)
			} else {
				b.errf(a.NameOff, "unknown attribute %s on <%s>: it takes %s", a.Name, n.Name, strings.Join(m.attrs, ", "))
			}
			continue
		}
		attrs[a.Name] = Attr{Value: a.Value.S, Off: a.Value.Offset(0)}
	}
	if !m.text {
		for _, t := range n.Text {
			if s := strings.TrimLeft(t.S, " \t\r\n"); s != "" {
				hint := "C code belongs in <before>, <after>, <replace> or <action>"
				if n.Name == "aspect" {
					hint = "C code belongs in <before>, <after> or <replace> inside an <advice>"
				}
				b.errf(t.Offset(len(t.S)-len(s)), "text %q is not allowed directly in <%s>: %s", firstLine(s), n.Name, hint)
			}
		}
	}
	for _, c := range n.Children {
		ok := false
		for _, k := range m.children {
			ok = ok || k == c.Name
		}
		if ok {
			continue
		}
		switch {
		case m.text:
			b.errf(c.Off, "element <%s> inside <%s>: <%s> holds only text; if this is C code, write < as &lt; or wrap the code in <![CDATA[ ... ]]>", c.Name, n.Name, n.Name)
		case len(m.children) == 0:
			b.errf(c.Off, "element <%s> inside <%s>: <%s> has no content; write it as <%s .../>", c.Name, n.Name, n.Name, n.Name)
		default:
			hint := misplaced[c.Name]
			if known := similarElement(c.Name); known != "" {
				hint = fmt.Sprintf("; did you mean <%s>?", known)
			}
			b.errf(c.Off, "unknown element <%s> in <%s>: it holds %s%s", c.Name, n.Name, tags(m.children), hint)
		}
	}
	return attrs
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return strings.TrimRight(s, " \t\r")
}

func (b *builder) requireAttr(n *xmlscan.Node, attrs map[string]Attr, name, example string) Attr {
	a, ok := attrs[name]
	if !ok {
		b.errf(n.Off, "<%s> needs a %s attribute: %s", n.Name, name, example)
		return Attr{Off: n.Off}
	}
	if strings.TrimSpace(a.Value) == "" {
		b.errf(a.Off, "empty %s attribute on <%s>: %s", name, n.Name, example)
	}
	return a
}

// identAttr requires a C identifier as the value of an attribute.
func (b *builder) identAttr(n *xmlscan.Node, attrs map[string]Attr, name, example string) Attr {
	a := b.requireAttr(n, attrs, name, example)
	if a.Value != "" && !isIdent(a.Value) {
		b.errf(a.Off, "%s=%q on <%s> is not a C identifier: %s", name, a.Value, n.Name, example)
	}
	return a
}

func isIdent(s string) bool {
	if s == "" || '0' <= s[0] && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			return false
		}
	}
	return true
}

func (b *builder) pointcut(n *xmlscan.Node, dst **Pointcut) {
	b.jobs = append(b.jobs, pointcutJob{text: n.AllText(), dst: dst})
}

// parsePointcuts runs the queued pointcut parses on all CPUs and reports
// their errors in document order.
func (b *builder) parsePointcuts() {
	errs := make([]*pointcutError, len(b.jobs))
	workers := min(runtime.GOMAXPROCS(0), len(b.jobs))
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(b.jobs) {
					return
				}
				j := b.jobs[i]
				expr, err := parsePointcut(j.text.S)
				if err != nil {
					errs[i] = err
					continue
				}
				*j.dst = &Pointcut{Expr: expr, Text: j.text}
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			b.errf(b.jobs[i].text.Offset(err.off), "%s", err.msg)
		}
	}
	b.jobs = nil
}

func hasChild(n *xmlscan.Node, name string) bool {
	for _, c := range n.Children {
		if c.Name == name {
			return true
		}
	}
	return false
}

// only returns the single child named name, reporting repeats.
func (b *builder) only(n *xmlscan.Node, names ...string) *xmlscan.Node {
	var found *xmlscan.Node
	for _, c := range n.Children {
		for _, name := range names {
			if c.Name != name {
				continue
			}
			if found != nil {
				if found.Name == c.Name {
					b.errf(c.Off, "<%s> has a second <%s>; it takes one", n.Name, c.Name)
				} else {
					b.errf(c.Off, "<%s> has both <%s> and <%s>; it takes one of %s", n.Name, found.Name, c.Name, tags(names))
				}
				continue
			}
			found = c
		}
	}
	return found
}

func (b *builder) build(root *xmlscan.Node) {
	if root.Name != "aspect" {
		b.errf(root.Off, "the root element is <%s>; an aspect file starts with <aspect>", root.Name)
		return
	}
	b.checkShape(root)
	if len(root.Children) == 0 || !hasChild(root, "advice") && !hasChild(root, "xflow") {
		b.errf(root.Off, "<aspect> has no <advice> and no <xflow>: nothing to weave; add e.g. <advice><pointcut>execution(vfs_read)</pointcut><before>printk(\"read\\n\");</before></advice>")
	}
	for _, c := range root.Children {
		switch c.Name {
		case "import":
			b.checkShape(c)
			t := c.AllText()
			h := strings.TrimSpace(t.S)
			switch {
			case h == "":
				b.errf(c.Off, "empty <import>: name a header, e.g. <import>linux/skbuff.h</import>")
			case strings.ContainsAny(h, "<>\" \t\r\n"):
				b.errf(t.Offset(len(t.S)-len(strings.TrimLeft(t.S, " \t\r\n"))), "<import> holds one header path without <> or quotes, e.g. <import>linux/skbuff.h</import>")
			}
			b.f.Imports = append(b.f.Imports, &Import{Off: c.Off, Header: h})
		case "advice":
			b.f.Advice = append(b.f.Advice, b.advice(c))
		case "xflow":
			b.f.Flows = append(b.f.Flows, b.flow(c))
		}
	}
}

func (b *builder) advice(n *xmlscan.Node) *Advice {
	b.checkShape(n)
	a := &Advice{Off: n.Off}
	pc := b.only(n, "pointcut")
	if pc == nil {
		b.errf(n.Off, "<advice> has no <pointcut>: add one such as <pointcut>access(sk_buff.data)</pointcut>")
	} else {
		b.checkShape(pc)
		b.pointcut(pc, &a.Pointcut)
	}
	body := b.only(n, "before", "after", Replace)
	if body == nil {
		b.errf(n.Off, "<advice> has no <before>, <after> or <replace>: add the C code to run, e.g. <before>printk(\"hit\\n\");</before>")
	} else {
		b.checkShape(body)
		a.When = body.Name
		a.Body = body.AllText()
	}
	return a
}

func (b *builder) flow(n *xmlscan.Node) *Flow {
	attrs := b.checkShape(n)
	name := b.identAttr(n, attrs, "name", `<xflow name="netflow">`)
	fl := &Flow{Off: n.Off, Name: name.Value, NameOff: name.Off}
	for _, c := range n.Children {
		if k := RuleKind(c.Name); k == Start || k == Transit || k == Quit {
			fl.Rules = append(fl.Rules, b.rule(c, k))
		}
	}
	if len(n.Children) == 0 {
		b.errf(n.Off, "<xflow name=%q> is empty: define where the flow starts, transits and quits with <start>, <transit> and <quit>", fl.Name)
	}
	return fl
}

func (b *builder) rule(n *xmlscan.Node, kind RuleKind) *Rule {
	b.checkShape(n)
	r := &Rule{Off: n.Off, Kind: kind}
	pc := b.only(n, "pointcut")
	if pc == nil {
		b.errf(n.Off, "<%s> has no <pointcut>: add one such as <pointcut>access(sk_buff.data) AND within_function(skb_clone)</pointcut>", kind)
	} else {
		b.checkShape(pc)
		b.pointcut(pc, &r.Pointcut)
	}
	switch kind {
	case Start, Quit:
		sel := b.only(n, "select", "action")
		if sel == nil {
			break
		}
		if sel.Name == "action" {
			b.checkShape(sel)
			t := sel.AllText()
			r.Action = &t
			break
		}
		attrs := b.checkShape(sel)
		r.Select = &Select{Off: sel.Off, LocalVar: b.identAttr(sel, attrs, "local_var", `<select local_var="data"/>`)}
	case Transit:
		names := contentModel["transit"].children[1:]
		p := b.only(n, names...)
		if p == nil {
			b.errf(n.Off, "<transit> needs one of %s to say how the flow ID passes on, e.g. <move from=\"skb\" to=\"n\"/>", tags(names))
			break
		}
		if p.Name == "action" {
			b.checkShape(p)
			t := p.AllText()
			r.Action = &t
			break
		}
		r.Pass = b.pass(p)
	}
	return r
}

func (b *builder) pass(n *xmlscan.Node) *Pass {
	attrs := b.checkShape(n)
	p := &Pass{Off: n.Off, Kind: PassKind(n.Name)}
	inter := strings.HasPrefix(n.Name, "x")
	if inter {
		p.Name = b.identAttr(n, attrs, "name", fmt.Sprintf(`<%s name="xennet" from="skb" to="tx">`, n.Name))
	}
	p.From = b.identAttr(n, attrs, "from", fmt.Sprintf(`<%s from="skb" to="n"/>`, n.Name))
	p.To = b.identAttr(n, attrs, "to", fmt.Sprintf(`<%s from="skb" to="n"/>`, n.Name))
	if p.From.Value != "" && p.From.Value == p.To.Value {
		b.errf(p.To.Off, "<%s> from and to name the same variable %q: to names the variable that receives the flow ID", n.Name, p.To.Value)
	}
	if p.Kind == XinMove || p.Kind == XinCopy {
		for _, c := range n.Children {
			if c.Name == "field" {
				p.Fields = append(p.Fields, b.field(c))
			}
		}
		if len(p.Fields) == 0 {
			b.errf(n.Off, "<%s> needs at least one <field name=\"MEMBER\" offset=\"BIT\" size=\"BITS\"/> saying where in the header the flow ID travels", n.Name)
		}
		b.checkFieldOverlap(p.Fields)
	}
	return p
}

func (b *builder) field(n *xmlscan.Node) *Field {
	attrs := b.checkShape(n)
	ex := `<field name="flags" offset="4" size="12"/>`
	f := &Field{Off: n.Off, Member: b.identAttr(n, attrs, "name", ex)}
	num := func(name string, lo, hi int) int {
		a := b.requireAttr(n, attrs, name, ex)
		if a.Value == "" {
			return -1
		}
		v, err := strconv.Atoi(strings.TrimSpace(a.Value))
		if err != nil || v < lo || v > hi {
			b.errf(a.Off, "%s=%q on <field> must be a whole number from %d to %d: %s", name, a.Value, lo, hi, ex)
			return -1
		}
		return v
	}
	f.Offset = num("offset", 0, 63)
	f.Size = num("size", 1, 32)
	if f.Offset >= 0 && f.Size > 0 && f.Offset+f.Size > 64 {
		b.errf(n.Off, "<field> bits %d..%d run past bit 63 of member %s: lower offset or size", f.Offset, f.Offset+f.Size-1, f.Member.Value)
	}
	return f
}

func (b *builder) checkFieldOverlap(fields []*Field) {
	for i, f := range fields {
		for _, g := range fields[:i] {
			if f.Member.Value == g.Member.Value && f.Offset >= 0 && g.Offset >= 0 &&
				f.Offset < g.Offset+g.Size && g.Offset < f.Offset+f.Size {
				b.errf(f.Off, "<field> bits %d..%d of %s overlap another field of the same member: each bit can carry one bit of the flow ID", f.Offset, f.Offset+f.Size-1, f.Member.Value)
			}
		}
	}
}

// Bounds on aspects. A hand-written aspect is a few KiB (the largest
// example is 6 KiB); the bounds leave room for generated ones while
// keeping what a wrong or hostile input costs small.
const (
	// MaxFileSize bounds an aspect file: klasy check and translate refuse
	// a larger one before parsing it (about 30,000 lines; checking that
	// takes about a second).
	MaxFileSize = 1 << 20
	// MaxPointcut bounds the text of one <pointcut>, which is refused
	// before it is parsed: a pointcut of that size already names
	// thousands of designators.
	MaxPointcut = 64 << 10
)

// Parse reads an aspect file. It returns the file (nil if the XML itself
// is malformed or the file is not UTF-8 text) and every error found while
// building it; semantic rules are checked by Check.
func Parse(filename string, src []byte) (*File, Diagnostics) {
	f := &File{Name: filename, lines: newLineIndex(filename, src)}
	if off, msg, ok := checkEncoding(src); !ok {
		pos := Position{Filename: filename} // the whole file
		if off >= 0 {
			pos = f.Position(off)
		}
		return nil, Diagnostics{{Pos: pos, Msg: msg}}
	}
	root, xerr := xmlscan.Parse(src)
	if xerr != nil {
		msg := xerr.Msg
		if xerr.Open != nil {
			msg += fmt.Sprintf(" opened at line %d", f.Position(xerr.Open.Off).Line)
			msg += endTagHint(xerr.Open, xerr.End)
		}
		return nil, Diagnostics{{Pos: f.Position(xerr.Off), Msg: msg}}
	}
	b := &builder{f: f}
	b.build(root)
	b.parsePointcuts()
	return f, b.diags.sortDedup()
}

// Load parses and checks an aspect file; the file is usable only if the
// diagnostics are empty.
func Load(filename string, src []byte) (*File, Diagnostics) {
	f, diags := Parse(filename, src)
	if f == nil {
		return nil, diags
	}
	diags = append(diags, Check(f)...)
	return f, diags.sortDedup()
}

// checkEncoding requires UTF-8 text without NUL bytes, as XML does. It
// names UTF-16 and UTF-32, which editors on Windows write, for the whole
// file (off -1), and points at the first NUL byte or invalid UTF-8
// sequence otherwise.
func checkEncoding(src []byte) (off int, msg string, ok bool) {
	utf := ""
	switch {
	case bytes.HasPrefix(src, []byte{0, 0, 0xfe, 0xff}) || bytes.HasPrefix(src, []byte{0xff, 0xfe, 0, 0}):
		utf = "UTF-32"
	case bytes.HasPrefix(src, []byte{0xfe, 0xff}) || bytes.HasPrefix(src, []byte{0xff, 0xfe}):
		utf = "UTF-16"
	case len(src) >= 2 && (src[0] == 0 && src[1] == '<' || src[0] == '<' && src[1] == 0):
		utf = "UTF-16" // without a byte order mark
	}
	if utf != "" {
		return -1, utf + " text; save the aspect as UTF-8", false
	}
	nul := bytes.IndexByte(src, 0)
	if nul < 0 && utf8.Valid(src) {
		return 0, "", true
	}
	end := len(src)
	if nul >= 0 {
		end = nul
	}
	for i := 0; i < end; {
		r, n := utf8.DecodeRune(src[i:end])
		if r == utf8.RuneError && n <= 1 {
			return i, fmt.Sprintf("invalid UTF-8 (byte 0x%02x): save the aspect as UTF-8", src[i]), false
		}
		i += n
	}
	return nul, "NUL byte: an aspect is UTF-8 text without NUL bytes", false
}
