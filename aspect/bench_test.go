package aspect

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"testing"
)

// bigAspect generates a valid aspect of about n lines: advice with
// multi-line pointcuts and bodies with escapes or in CDATA, comments,
// plus a flow definition, the shape of a large hand-written tracing
// aspect.
func bigAspect(n int) []byte {
	var b strings.Builder
	b.WriteString("<aspect>\n  <import>linux/skbuff.h</import>\n")
	b.WriteString(`  <xflow name="netflow">
    <start><pointcut>access(sk_buff.data) AND within_function(__alloc_skb)</pointcut></start>
    <transit>
      <pointcut>access(sk_buff.head) AND within_function(skb_clone)</pointcut>
      <copy from="skb" to="n"/>
    </transit>
    <quit><pointcut>access(sk_buff.%) AND within_function(kfree_skbmem)</pointcut></quit>
  </xflow>
`)
	lines := 11
	for i := 0; lines < n-1; i++ {
		if i%2 == 1 {
			fmt.Fprintf(&b, `  <!-- advice %d: the body in CDATA -->
  <advice>
    <pointcut>
      access(sk_buff.field%d) AND
      within_file(net/core/dev%d.c) AND target(skb)
    </pointcut>
    <before><![CDATA[
      struct sk_buff *s = skb;
      if (s->len < %d && s->data != NULL)
        printk("len %%u\n", s->len);
    ]]></before>
  </advice>
`, i, i, i, i)
			lines += 12
			continue
		}
		fmt.Fprintf(&b, `  <advice>
    <pointcut>
      access(sk_buff.field%d) AND
      (within_file(net/core/dev%d.c) OR within_function(netif_%%_%d@linux0))
      AND target(skb) AND xflow(netflow, skb, id)
    </pointcut>
    <before>
      struct sk_buff *s = skb;
      if (s-&gt;len &lt; %d &amp;&amp; id != 0)
        printk("flow %%d len %%u\n", id, s-&gt;len);
    </before>
  </advice>
`, i, i, i, i)
		lines += 12
	}
	b.WriteString("</aspect>\n")
	return []byte(b.String())
}

// BenchmarkCheck100000Lines is ten times the aspect above: klasy check
// should take about ten times as long, not a hundred.
func BenchmarkCheck100000Lines(b *testing.B) {
	src := bigAspect(100000)
	b.SetBytes(int64(len(src)))
	for i := 0; i < b.N; i++ {
		Load("big.klasy", src)
	}
}

// BenchmarkCheck10000Lines measures what klasy check does with a file
// (parse the XML, parse every pointcut, check the rules) beside the
// baseline of merely tokenizing the same file with encoding/xml.
// Target: klasy check under 100 ms.
func BenchmarkCheck10000Lines(b *testing.B) {
	src := bigAspect(10000)
	if n := strings.Count(string(src), "\n"); n < 10000 {
		b.Fatalf("generated %d lines", n)
	}
	if _, diags := Load("big.klasy", src); len(diags) > 0 {
		b.Fatalf("generated aspect is invalid: %v", diags[:1])
	}
	b.Run("baseline=encoding-xml-tokens", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for i := 0; i < b.N; i++ {
			d := xml.NewDecoder(strings.NewReader(string(src)))
			for {
				if _, err := d.Token(); err == io.EOF {
					break
				} else if err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("klasy-check", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for i := 0; i < b.N; i++ {
			Load("big.klasy", src)
		}
	})
}
