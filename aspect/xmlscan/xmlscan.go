// Package xmlscan scans the XML layer of a klasy aspect file into a tree
// of elements whose text keeps the file offset of every decoded byte.
//
// Aspects use a small part of XML: elements, attributes, character data
// with the five predefined entities and character references, CDATA
// sections, comments and an optional <?xml?> declaration. It is scanned by
// hand rather than with encoding/xml because every decoded character must
// keep its byte offset in the file: a pointcut error inside a multi-line
// <pointcut> that contains &amp;amp; has to point at the right column of the
// aspect file.
package xmlscan

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Text is character data decoded from the aspect file, with the file
// offset of every decoded byte so that positions inside it (a pointcut
// token, later a C compiler error in an advice body) map back to the file.
type Text struct {
	S   string
	off []int32 // off[i] is the file offset of S[i]; off[len(S)] is the end
	// Start is the offset just after the opening tag, used when S is empty.
	Start int
}

// Offset returns the file offset of byte i of t.S (i may be len(t.S)).
func (t Text) Offset(i int) int {
	if len(t.off) == 0 {
		return t.Start
	}
	if i < 0 {
		i = 0
	}
	if i >= len(t.off) {
		i = len(t.off) - 1
	}
	return int(t.off[i])
}

// PlainText makes a Text that does not come from a file (generated code).
func PlainText(s string) Text { return Text{S: s} }

// Attr is an attribute of an element.
type Attr struct {
	Name    string
	NameOff int
	Value   Text
}

// Node is an element; its content is a list of child elements and
// text runs in document order.
type Node struct {
	Name     string
	Off      int // offset of '<'
	Attrs    []Attr
	Children []*Node
	Text     []Text // non-empty character data runs between children
	SelfEnd  bool   // written <name .../>
	inner    int    // offset just after the start tag
}

// AllText joins the node's character data (comments in between drop out).
func (n *Node) AllText() Text {
	switch len(n.Text) {
	case 0:
		return Text{Start: n.inner}
	case 1:
		return n.Text[0]
	}
	var b strings.Builder
	var off []int32
	for _, t := range n.Text {
		b.WriteString(t.S)
		off = append(off, t.off[:len(t.S)]...)
	}
	last := n.Text[len(n.Text)-1]
	return Text{S: b.String(), off: append(off, last.off[len(last.S)]), Start: n.inner}
}

// Error is the first syntax error in a file.
type Error struct {
	Off int
	Msg string
	// Open, for an end tag that does not match, is the element it should
	// end, and End the name it has; the caller says where Open starts and
	// what may have gone wrong.
	Open *Node
	End  string
}

func (e *Error) Error() string { return e.Msg }

type xmlScanner struct {
	src   []byte
	i     int
	depth int // elements open around s.i
}

// maxElementDepth bounds element nesting, which the scanner follows by
// recursion: a legitimate aspect nests five deep (<aspect> <xflow>
// <transit> <xin_move> <field>), a crafted one must not exhaust the stack.
const maxElementDepth = 64

// Parse returns the root element of src or the first syntax error.
func Parse(src []byte) (*Node, *Error) {
	s := &xmlScanner{src: src}
	if strings.HasPrefix(string(src[:min(3, len(src))]), "\xef\xbb\xbf") {
		s.i = 3
	}
	root, err := s.document()
	if err != nil {
		return nil, err
	}
	return root, nil
}

func (s *xmlScanner) errf(off int, format string, args ...any) *Error {
	return &Error{Off: off, Msg: fmt.Sprintf(format, args...)}
}

func (s *xmlScanner) has(p string) bool {
	return strings.HasPrefix(string(s.src[s.i:min(len(s.src), s.i+len(p))]), p)
}

func (s *xmlScanner) skipSpace() {
	for s.i < len(s.src) && isSpace(s.src[s.i]) {
		s.i++
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isNameStart(c byte) bool {
	return c == '_' || c == ':' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c >= 0x80
}

func isNameChar(c byte) bool {
	return isNameStart(c) || c == '-' || c == '.' || '0' <= c && c <= '9'
}

// misc skips whitespace, comments and processing instructions outside
// the root element.
func (s *xmlScanner) misc() *Error {
	for {
		s.skipSpace()
		switch {
		case s.has("<!--"):
			if err := s.comment(); err != nil {
				return err
			}
		case s.has("<?"):
			if err := s.procInst(); err != nil {
				return err
			}
		case s.has("<!DOCTYPE"):
			return s.errf(s.i, "document type declarations are not supported in aspects; start the file with <aspect>")
		default:
			return nil
		}
	}
}

func (s *xmlScanner) document() (*Node, *Error) {
	if err := s.misc(); err != nil {
		return nil, err
	}
	if s.i >= len(s.src) {
		return nil, s.errf(s.i, "empty aspect file: an aspect starts with <aspect> and ends with </aspect>")
	}
	if s.src[s.i] != '<' {
		return nil, s.errf(s.i, "text before the root element: an aspect file starts with <aspect>")
	}
	root, err := s.element()
	if err != nil {
		return nil, err
	}
	if err := s.misc(); err != nil {
		return nil, err
	}
	if s.i < len(s.src) {
		return nil, s.errf(s.i, "content after </%s>: an aspect file holds exactly one <aspect> element", root.Name)
	}
	return root, nil
}

func (s *xmlScanner) comment() *Error {
	start := s.i
	end := bytes.Index(s.src[s.i+4:], []byte("-->"))
	if end < 0 {
		return s.errf(start, "comment <!-- is never closed with -->")
	}
	s.i += 4 + end + 3
	return nil
}

func (s *xmlScanner) procInst() *Error {
	start := s.i
	end := bytes.Index(s.src[s.i+2:], []byte("?>"))
	if end < 0 {
		return s.errf(start, "processing instruction <? is never closed with ?>")
	}
	s.i += 2 + end + 2
	return nil
}

func (s *xmlScanner) name() (string, int) {
	start := s.i
	if s.i < len(s.src) && isNameStart(s.src[s.i]) {
		s.i++
		for s.i < len(s.src) && isNameChar(s.src[s.i]) {
			s.i++
		}
	}
	return string(s.src[start:s.i]), start
}

// element scans one element starting at '<'.
func (s *xmlScanner) element() (*Node, *Error) {
	n := &Node{Off: s.i}
	if s.depth == maxElementDepth {
		return nil, s.errf(n.Off, "elements nested more than %d deep: an aspect nests at most five (<aspect><xflow><transit><xin_move><field>)", maxElementDepth)
	}
	s.i++ // '<'
	name, _ := s.name()
	if name == "" {
		return nil, s.errf(n.Off, "'<' must start a tag such as <advice>; in C code write < as &lt; or wrap the code in <![CDATA[ ... ]]>")
	}
	n.Name = name
	for {
		hadSpace := s.i < len(s.src) && isSpace(s.src[s.i])
		s.skipSpace()
		if s.i >= len(s.src) {
			return nil, s.errf(n.Off, "tag <%s is never closed with >", name)
		}
		c := s.src[s.i]
		if c == '>' {
			s.i++
			break
		}
		if c == '/' {
			if s.i+1 < len(s.src) && s.src[s.i+1] == '>' {
				s.i += 2
				n.SelfEnd = true
				n.inner = s.i
				return n, nil
			}
			return nil, s.errf(s.i, "expected /> or > to end tag <%s", name)
		}
		if !isNameStart(c) || !hadSpace {
			return nil, s.errf(s.i, "malformed tag <%s: expected an attribute (name=\"value\"), > or />; if this is C code, write < as &lt; or wrap the code in <![CDATA[ ... ]]>", name)
		}
		an, aoff := s.name()
		s.skipSpace()
		if s.i >= len(s.src) || s.src[s.i] != '=' {
			return nil, s.errf(aoff, "attribute %s of <%s> has no value: write %s=\"...\"", an, name, an)
		}
		s.i++
		s.skipSpace()
		if s.i >= len(s.src) || (s.src[s.i] != '"' && s.src[s.i] != '\'') {
			return nil, s.errf(s.i, "value of attribute %s must be quoted: %s=\"...\"", an, an)
		}
		v, err := s.attrValue()
		if err != nil {
			return nil, err
		}
		for _, a := range n.Attrs {
			if a.Name == an {
				return nil, s.errf(aoff, "attribute %s appears twice on <%s>", an, name)
			}
		}
		n.Attrs = append(n.Attrs, Attr{Name: an, NameOff: aoff, Value: v})
	}
	s.depth++
	err := s.content(n)
	s.depth--
	if err != nil {
		return nil, err
	}
	return n, nil
}

func (s *xmlScanner) attrValue() (Text, *Error) {
	q := s.src[s.i]
	start := s.i
	s.i++
	var b []byte
	var off []int32
	for {
		if s.i >= len(s.src) {
			return Text{}, s.errf(start, "attribute value is never closed with %c", q)
		}
		c := s.src[s.i]
		switch c {
		case q:
			off = append(off, int32(s.i))
			s.i++
			return Text{S: string(b), off: off, Start: start + 1}, nil
		case '<':
			return Text{}, s.errf(s.i, "'<' is not allowed in an attribute value; write &lt;")
		case '&':
			at := s.i
			r, err := s.entity()
			if err != nil {
				return Text{}, err
			}
			for range r {
				off = append(off, int32(at))
			}
			b = append(b, r...)
		default:
			b = append(b, c)
			off = append(off, int32(s.i))
			s.i++
		}
	}
}

// entity decodes &...; at s.i.
func (s *xmlScanner) entity() (string, *Error) {
	start := s.i
	semi := -1
	for j := s.i + 1; j < len(s.src) && j < s.i+12; j++ {
		c := s.src[j]
		if c == ';' && j > s.i+1 {
			semi = j
			break
		}
		if !(c == '#' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			break
		}
	}
	hint := "XML knows &lt; &gt; &amp; &quot; &apos; and &#NN;; write & as &amp; or wrap C code in <![CDATA[ ... ]]>"
	if semi < 0 {
		return "", s.errf(start, "bare '&' in XML text: %s", hint)
	}
	name := string(s.src[s.i+1 : semi])
	s.i = semi + 1
	switch name {
	case "lt":
		return "<", nil
	case "gt":
		return ">", nil
	case "amp":
		return "&", nil
	case "quot":
		return "\"", nil
	case "apos":
		return "'", nil
	}
	if strings.HasPrefix(name, "#") {
		var r rune
		var ok bool
		if strings.HasPrefix(name, "#x") {
			r, ok = parseRune(name[2:], 16)
		} else {
			r, ok = parseRune(name[1:], 10)
		}
		if ok && r != 0 && utf8.ValidRune(r) {
			return string(r), nil
		}
		return "", s.errf(start, "invalid character reference &%s;", name)
	}
	return "", s.errf(start, "unknown entity &%s;: %s", name, hint)
}

func parseRune(digits string, base int) (rune, bool) {
	if digits == "" || len(digits) > 8 {
		return 0, false
	}
	var r rune
	for _, c := range digits {
		var d rune
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case base == 16 && 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case base == 16 && 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		r = r*rune(base) + d
	}
	return r, r <= utf8.MaxRune
}

// content scans the inside of n up to and including its end tag. Text
// runs separated only by comments or CDATA boundaries are merged.
func (s *xmlScanner) content(n *Node) *Error {
	var b []byte
	var off []int32
	n.inner = s.i
	textStart := s.i
	flush := func(end int) {
		if len(b) > 0 {
			n.Text = append(n.Text, Text{S: string(b), off: append(off, int32(end)), Start: textStart})
		}
		b, off = nil, nil
	}
	for {
		if s.i >= len(s.src) {
			return s.errf(n.Off, "<%s> is never closed: add </%s>", n.Name, n.Name)
		}
		c := s.src[s.i]
		switch {
		case c == '<' && s.has("</"):
			end := s.i
			s.i += 2
			name, noff := s.name()
			s.skipSpace()
			if s.i >= len(s.src) || s.src[s.i] != '>' {
				return s.errf(end, "malformed end tag </%s: expected >", name)
			}
			s.i++
			if name != n.Name {
				e := s.errf(noff-2, "end tag </%s> does not match <%s>", name, n.Name)
				e.Open, e.End = n, name
				return e
			}
			flush(end) // the final text run ends just before the end tag
			return nil
		case c == '<' && s.has("<!--"):
			if err := s.comment(); err != nil {
				return err
			}
		case c == '<' && s.has("<![CDATA["):
			start := s.i
			s.i += 9
			end := bytes.Index(s.src[s.i:], []byte("]]>"))
			if end < 0 {
				return s.errf(start, "<![CDATA[ is never closed with ]]>")
			}
			for j := 0; j < end; j++ {
				if s.src[s.i+j] == '\r' && j+1 < end && s.src[s.i+j+1] == '\n' {
					continue
				}
				b = append(b, s.src[s.i+j])
				off = append(off, int32(s.i+j))
			}
			s.i += end + 3
		case c == '<' && s.has("<?"):
			if err := s.procInst(); err != nil {
				return err
			}
		case c == '<':
			flush(s.i)
			child, err := s.element()
			if err != nil {
				return err
			}
			n.Children = append(n.Children, child)
			textStart = s.i
		case c == '&':
			at := s.i
			r, err := s.entity()
			if err != nil {
				return err
			}
			for range r {
				off = append(off, int32(at))
			}
			b = append(b, r...)
		case c == '\r' && s.i+1 < len(s.src) && s.src[s.i+1] == '\n':
			s.i++ // XML normalizes CR LF to LF
		default:
			b = append(b, c)
			off = append(off, int32(s.i))
			s.i++
		}
	}
}
