package lab

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// BenchmarkAgentTransfer measures the agent's line (virtio-serial) in both
// directions in the same lab: host-to-guest (WriteFile, what loading a
// module costs) beside guest-to-host (ReadFile, what trace records
// cost). Random data, so nothing on the way can compress it.
func BenchmarkAgentTransfer(b *testing.B) {
	needLab(b, Debian)
	agent := testAgent(b)
	ctx := context.Background()
	l, err := Up(ctx, Config{Name: testName("bench"), Agent: agent})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Down(ctx)
	data := make([]byte, 64<<10)
	rand.Read(data)
	c := l.Client()
	b.Run("host-to-guest-64KiB", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for i := 0; i < b.N; i++ {
			if err := c.WriteFile(ctx, "/tmp/bench", data, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	})
	// Exec streams: a command's stdin host-to-guest, its output back,
	// in 64 KiB chunks paced by acknowledgements, through the lab's mux.
	big := make([]byte, 8<<20)
	rand.Read(big)
	if code, err := c.Exec(ctx, []string{"sh", "-c", "cat >/tmp/bench-big"}, bytes.NewReader(big), io.Discard, io.Discard); err != nil || code != 0 {
		b.Fatalf("writing /tmp/bench-big: %d, %v", code, err)
	}
	b.Run("exec-stdin-host-to-guest-8MiB", func(b *testing.B) {
		b.SetBytes(int64(len(big)))
		for i := 0; i < b.N; i++ {
			var out bytes.Buffer
			code, err := c.Exec(ctx, []string{"wc", "-c"}, bytes.NewReader(big), &out, io.Discard)
			if err != nil || code != 0 || strings.TrimSpace(out.String()) != fmt.Sprint(len(big)) {
				b.Fatalf("exec: %q, %d, %v", out.String(), code, err)
			}
		}
	})
	b.Run("exec-output-guest-to-host-8MiB", func(b *testing.B) {
		b.SetBytes(int64(len(big)))
		for i := 0; i < b.N; i++ {
			var out bytes.Buffer
			code, err := c.Exec(ctx, []string{"cat", "/tmp/bench-big"}, nil, &out, io.Discard)
			if err != nil || code != 0 || !bytes.Equal(out.Bytes(), big) {
				b.Fatalf("exec: %d bytes, %d, %v", out.Len(), code, err)
			}
		}
	})
	b.Run("guest-to-host-64KiB", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for i := 0; i < b.N; i++ {
			got, err := c.ReadFile(ctx, "/tmp/bench")
			if err != nil {
				b.Fatal(err)
			}
			if !bytes.Equal(got, data) {
				b.Fatal("read back different bytes")
			}
		}
	})
}

// BenchmarkBoot measures `up` (QEMU start to the agent's answer) and
// `down` for each kernel flavor in the cache, side by side.
func BenchmarkBoot(b *testing.B) {
	needLab(b, Debian)
	agent := testAgent(b)
	for _, flavor := range []string{Debian, Built} {
		if _, err := FindKernel(flavor); err != nil {
			b.Logf("%s kernel not in the cache: %v", flavor, err)
			continue
		}
		b.Run(flavor, func(b *testing.B) {
			ctx := context.Background()
			var up, down time.Duration
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				l, err := Up(ctx, Config{Name: testName(fmt.Sprint("boot-", flavor)), Kernel: flavor, Agent: agent})
				if err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if err := l.Down(ctx); err != nil {
					b.Fatal(err)
				}
				up += t1.Sub(t0)
				down += time.Since(t1)
			}
			b.ReportMetric(up.Seconds()/float64(b.N), "s-up")
			b.ReportMetric(down.Seconds()/float64(b.N), "s-down")
		})
	}
}
