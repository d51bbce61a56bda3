package aspect

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// Format writes f as an aspect file that Parse reads back to the same
// aspect. Pointcuts are printed in canonical form; bodies are kept as
// written, in a CDATA section when they contain < or &.
func Format(w io.Writer, f *File) error {
	bw := bufio.NewWriter(w)
	p := func(format string, args ...any) { fmt.Fprintf(bw, format, args...) }
	if f.Comment != "" {
		p("<!-- %s -->\n", strings.ReplaceAll(f.Comment, "--", "- -"))
	}
	p("<aspect>\n")
	for _, im := range f.Imports {
		p("  <import>%s</import>\n", escapeText(im.Header))
	}
	for _, a := range f.Advice {
		p("  <advice>\n")
		p("    <pointcut>%s</pointcut>\n", escapeText(a.Pointcut.Expr.String()))
		p("    <%s>%s</%s>\n", a.When, body(a.Body.S), a.When)
		p("  </advice>\n")
	}
	for _, fl := range f.Flows {
		p("  <xflow name=\"%s\">\n", escapeAttr(fl.Name))
		for _, r := range fl.Rules {
			p("    <%s>\n", r.Kind)
			p("      <pointcut>%s</pointcut>\n", escapeText(r.Pointcut.Expr.String()))
			if r.Select != nil {
				p("      <select local_var=\"%s\"/>\n", escapeAttr(r.Select.LocalVar.Value))
			}
			if r.Action != nil {
				p("      <action>%s</action>\n", body(r.Action.S))
			}
			if x := r.Pass; x != nil {
				p("      <%s", x.Kind)
				if x.Name.Value != "" {
					p(" name=\"%s\"", escapeAttr(x.Name.Value))
				}
				p(" from=\"%s\" to=\"%s\"", escapeAttr(x.From.Value), escapeAttr(x.To.Value))
				if len(x.Fields) == 0 {
					p("/>\n")
				} else {
					p(">\n")
					for _, fd := range x.Fields {
						p("        <field name=\"%s\" offset=\"%d\" size=\"%d\"/>\n", escapeAttr(fd.Member.Value), fd.Offset, fd.Size)
					}
					p("      </%s>\n", x.Kind)
				}
			}
			p("    </%s>\n", r.Kind)
		}
		p("  </xflow>\n")
	}
	p("</aspect>\n")
	return bw.Flush()
}

var textEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")
var attrEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")

func escapeText(s string) string { return textEscaper.Replace(s) }
func escapeAttr(s string) string { return attrEscaper.Replace(s) }

// body prints C code so that it stays readable: as is when XML allows,
// in CDATA when it has < or &, escaped when it holds "]]>" itself.
func body(s string) string {
	switch {
	case strings.Contains(s, "]]>"):
		return escapeText(s)
	case strings.ContainsAny(s, "<&"):
		return "<![CDATA[" + s + "]]>"
	}
	return s
}
