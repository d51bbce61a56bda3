//go:build linux

package agent

import (
	"context"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkTransfer measures WriteFile throughput over net.Pipe and over a
// raw pty, each next to a baseline measured in the same run: the same
// bytes copied over the same kind of channel without the protocol. The
// data is random, so compression cannot flatter the protocol.
func BenchmarkTransfer(b *testing.B) {
	data := make([]byte, 4<<20)
	rand.NewChaCha8([32]byte{7}).Read(data)
	channels := []struct {
		name string
		open func(b *testing.B) (client, server io.ReadWriteCloser)
	}{
		{"pipe", func(b *testing.B) (io.ReadWriteCloser, io.ReadWriteCloser) {
			x, y := net.Pipe()
			return x, y
		}},
		{"pty", func(b *testing.B) (io.ReadWriteCloser, io.ReadWriteCloser) {
			m, p := openPTY(b)
			s, err := OpenSerial(p)
			if err != nil {
				b.Fatal(err)
			}
			return m, s
		}},
	}
	for _, ch := range channels {
		b.Run(ch.name+"/baseline-copy", func(b *testing.B) {
			c, s := ch.open(b)
			defer c.Close()
			defer s.Close()
			b.SetBytes(int64(len(data)))
			for i := 0; i < b.N; i++ {
				done := make(chan error)
				go func() {
					// Read as the frame reader does: into a large buffer.
					_, err := io.ReadFull(s, make([]byte, len(data)))
					done <- err
				}()
				if _, err := c.Write(data); err != nil {
					b.Fatal(err)
				}
				if err := <-done; err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(ch.name+"/WriteFile", func(b *testing.B) {
			c, s := ch.open(b)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go Serve(ctx, s, ServerOptions{})
			cl := NewClient(c)
			defer cl.Close()
			path := filepath.Join(b.TempDir(), "f")
			b.SetBytes(int64(len(data)))
			for i := 0; i < b.N; i++ {
				if err := cl.WriteFile(ctx, path, data, 0o600); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			os.Remove(path)
		})
	}
}
