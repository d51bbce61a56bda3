package main

import (
	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/xflow"
)

const translateHelp = `usage: klasy translate FILE

Print FILE as a plain aspect: every xflow definition becomes advice that
calls the flow ID runtime (get_new_flowid, register_flowid, get_flowid,
remove_flowid), placed before the user's advice, and every advice using
xflow(...) runs its body only for data of the flow. The output is an
aspect that 'klasy check' accepts; it is what the weaver weaves. Errors
are printed as by 'klasy check' and nothing is printed on stdout. A FILE
of - is standard input. FILE has the limits 'klasy check' gives: UTF-8
text of at most 1 MiB, pointcuts of at most 64 KiB.

A flow is defined once and used in any advice:

  <aspect>
    <xflow name="netflow">
      <start>     <!-- a new flow ID for each skb allocated -->
        <pointcut>access(sk_buff.data) AND within_function(__alloc_skb)</pointcut>
      </start>
      <transit>   <!-- clones carry the ID on -->
        <pointcut>access(sk_buff.head) AND within_function(skb_clone)</pointcut>
        <copy from="skb" to="n"/>
      </transit>
      <quit>
        <pointcut>access(sk_buff.%) AND within_function(kfree_skbmem)</pointcut>
      </quit>
    </xflow>
    <advice>
      <pointcut>access(sk_buff.len) AND target(skb) AND xflow(netflow, skb, id)</pointcut>
      <before>printk("flow %d at %pS\n", id, (void *)$pc$);</before>
    </advice>
  </aspect>

<start> and <quit> act on the accessed structure, or on a local variable
named by <select local_var="VAR"/>. <transit> passes the ID with one of
<move from= to=/>, <copy from= to=/>, or, across Xen domains, <xin_move>
/<xin_copy name= from= to=> with <field name= offset= size=/> children
(the ID is stored in those header bits from its low bits upward) and
<xout_move>/<xout_copy name= from= to=/> at the receiving side. Any rule
may instead hold <action>C code</action>.
`

func init() {
	register(&command{
		Name:    "translate",
		Summary: "print an aspect with its xflow definitions turned into plain advice",
		Help:    translateHelp,
		Run:     runTranslate,
	})
}

func runTranslate(s *stdio, args []string) error {
	fs := newFlagSet("translate")
	if err := fs.Parse(args); err != nil {
		return err
	}
	files := fs.Args()
	if len(files) != 1 {
		return usageError{Msg: "give exactly one aspect file"}
	}
	name, src, err := readAspect(s, files[0])
	if err != nil {
		return err
	}
	f, diags := aspect.Load(name, src)
	if len(diags) > 0 {
		printDiagnostics(s, diags, false)
		return exitError{Code: 1}
	}
	out, err := xflow.Translate(f)
	if err != nil {
		return err
	}
	return aspect.Format(s.Out, out)
}
