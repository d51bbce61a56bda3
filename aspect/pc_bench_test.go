package aspect

import "testing"

// BenchmarkParsePointcut is one typical multi-line pointcut, for
// tuning the grammar; BenchmarkCheck10000Lines is the figure that counts.
func BenchmarkParsePointcut(b *testing.B) {
	s := "\n      access(sk_buff.field1) AND\n      (within_file(net/core/dev1.c) OR within_function(netif_%_1@linux0))\n      AND target(skb) AND xflow(netflow, skb, id)\n    "
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := parsePointcut(s); err != nil {
			b.Fatal(err.msg)
		}
	}
}
