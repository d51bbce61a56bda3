package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/internal/boundedread"
)

// endless is an input that never ends: a prefix, then body over and
// over, as /dev/zero (prefix and body empty: zeros) or a generator on a
// pipe gives it.
type endless struct {
	prefix, body string
	i            int
}

func (e *endless) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if e.i < len(e.prefix) {
			c := copy(p[n:], e.prefix[e.i:])
			e.i += c
			n += c
			continue
		}
		if e.body == "" {
			clear(p[n:])
			return len(p), nil
		}
		k := (e.i - len(e.prefix)) % len(e.body)
		c := copy(p[n:], e.body[k:])
		e.i += c
		n += c
	}
	return n, nil
}

// aspectLines is a valid aspect with an unknown designator on line 4,
// in the given line ends.
func aspectLines(eol string) string {
	return strings.Join([]string{
		"<aspect>",
		"  <advice>",
		"    <pointcut>access(sk_buff.len) AND",
		"      within_file(a.c) AND cflow(x)</pointcut>",
		"    <before>f();</before>",
		"  </advice>",
		"</aspect>",
	}, eol) + eol
}

// oneAdvice is an aspect with one advice.
func oneAdvice(pointcut, body string) string {
	return "<aspect>\n  <advice>\n    <pointcut>" + pointcut + "</pointcut>\n    <before>" + body + "</before>\n  </advice>\n</aspect>\n"
}

// Hostile inputs to the aspect language's input path: klasy check and
// klasy translate.
func init() {
	limit := boundedread.Size(aspect.MaxFileSize)
	tooLarge := "larger than the " + limit + " limit for an aspect"
	hostileCases = append(hostileCases,
		// Unbounded reads: each input is refused at the bound or before.
		hostileCase{
			name: "check-dev-zero", class: "unbounded", want: "reading aspect: /dev/zero: a character device, not a regular file or a pipe",
			setup: func(t *testing.T, dir string) hostileRun {
				return hostileRun{args: []string{"check", "/dev/zero"}, timeout: 5 * time.Second, maxRSS: 64}
			},
		},
		hostileCase{
			name: "translate-dev-urandom", class: "unbounded", want: "/dev/urandom: a character device, not a regular file or a pipe",
			setup: func(t *testing.T, dir string) hostileRun {
				return hostileRun{args: []string{"translate", "/dev/urandom"}, timeout: 5 * time.Second, maxRSS: 64}
			},
		},
		hostileCase{
			name: "check-stdin-zeros", class: "unbounded", want: "reading aspect: <stdin>: " + tooLarge,
			setup: func(t *testing.T, dir string) hostileRun {
				return hostileRun{args: []string{"check", "-"}, stdin: &endless{}, timeout: 5 * time.Second, maxRSS: 64}
			},
		},
		hostileCase{
			name: "translate-stdin-endless-pointcut", class: "unbounded", want: "<stdin>: " + tooLarge,
			setup: func(t *testing.T, dir string) hostileRun {
				return hostileRun{args: []string{"translate", "-"},
					stdin:   &endless{prefix: "<aspect><advice><pointcut>execution(f)", body: " OR execution(f)"},
					timeout: 5 * time.Second, maxRSS: 64}
			},
		},
		hostileCase{
			name: "check-fifo-endless", class: "unbounded", want: "fifo.klasy: " + tooLarge,
			setup: func(t *testing.T, dir string) hostileRun {
				p := filepath.Join(dir, "fifo.klasy")
				if err := syscall.Mkfifo(p, 0o600); err != nil {
					t.Skipf("mkfifo: %v", err)
				}
				done := make(chan struct{})
				go func() {
					defer close(done)
					w, err := os.OpenFile(p, os.O_WRONLY, 0)
					if err != nil {
						return
					}
					defer w.Close()
					io.Copy(w, &endless{prefix: "<aspect>", body: "<!-- all work and no play -->\n"}) // EPIPE once klasy is gone
				}()
				t.Cleanup(func() {
					// Should klasy not have opened the FIFO, open it so
					// that the writer's open returns and its write fails.
					if r, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
						r.Close()
					}
					<-done
				})
				return hostileRun{args: []string{"check", p}, timeout: 5 * time.Second, maxRSS: 64}
			},
		},
		hostileCase{
			name: "check-file-over-limit", class: "unbounded", want: "big.klasy: " + tooLarge,
			setup: func(t *testing.T, dir string) hostileRun {
				src := oneAdvice("execution(f)", strings.Repeat("f();\n", aspect.MaxFileSize/5+1))
				return hostileRun{args: []string{"check", writeAspect(t, "big.klasy", src)}, timeout: 5 * time.Second, maxRSS: 64}
			},
		},
		hostileCase{
			name: "check-directory", class: "unbounded", want: ": a directory, not a regular file or a pipe",
			setup: func(t *testing.T, dir string) hostileRun {
				return hostileRun{args: []string{"check", dir}, timeout: 5 * time.Second, maxRSS: 64}
			},
		},
		// Smaller ones: positions, encodings, the pointcut bound.
		hostileCase{
			name: "check-cr-line-ends", class: "small", want: "cr.klasy:4:28: unknown pointcut designator cflow",
			setup: func(t *testing.T, dir string) hostileRun {
				return hostileRun{args: []string{"check", writeAspect(t, "cr.klasy", aspectLines("\r"))}}
			},
		},
		hostileCase{
			name: "check-nul-in-advice", class: "small", want: "nul.klasy:4:17: NUL byte: an aspect is UTF-8 text without NUL bytes",
			setup: func(t *testing.T, dir string) hostileRun {
				return hostileRun{args: []string{"check", writeAspect(t, "nul.klasy", oneAdvice("execution(f)", "f();\x00"))}}
			},
		},
		hostileCase{
			name: "check-latin1-in-advice", class: "small", want: "latin1.klasy:4:24: invalid UTF-8 (byte 0xe9): save the aspect as UTF-8",
			setup: func(t *testing.T, dir string) hostileRun {
				return hostileRun{args: []string{"check", writeAspect(t, "latin1.klasy", oneAdvice("execution(f)", "printk(\"caf\xe9\");"))}}
			},
		},
		hostileCase{
			name: "check-utf16-bom", class: "small", want: "utf16.klasy: UTF-16 text; save the aspect as UTF-8",
			setup: func(t *testing.T, dir string) hostileRun {
				src := []byte{0xff, 0xfe}
				for _, c := range []byte(oneAdvice("execution(f)", "f();")) {
					src = append(src, c, 0)
				}
				return hostileRun{args: []string{"check", writeAspect(t, "utf16.klasy", string(src))}}
			},
		},
		hostileCase{
			name: "translate-long-pointcut", class: "small", want: "long.klasy:3:15: pointcut of ",
			setup: func(t *testing.T, dir string) hostileRun {
				pc := "execution(f)" + strings.Repeat(" OR execution(f)", (aspect.MaxFileSize-200)/16)
				return hostileRun{args: []string{"translate", writeAspect(t, "long.klasy", oneAdvice(pc, "f();"))},
					timeout: 5 * time.Second, maxRSS: 128}
			},
		},
		// Advice that closes the function it is generated into and
		// defines one of its own (issue 21) is refused at its brace,
		// by check and before a weave looks at any kernel.
		hostileCase{
			name: "check-advice-escapes-function", class: "wrong", want: "evil.klasy:4:18: `}` has no `{` to close in this advice",
			setup: func(t *testing.T, dir string) hostileRun {
				return hostileRun{args: []string{"check", writeAspect(t, "evil.klasy", oneAdvice("execution(f)", "f(); } int evil(void) { return 0; "))}}
			},
		},
		hostileCase{
			name: "weave-advice-unclosed-brace", class: "wrong", want: "open.klasy:4:20: `{` is not closed in this advice",
			setup: func(t *testing.T, dir string) hostileRun {
				return hostileRun{args: []string{"weave", "--lab", "h", writeAspect(t, "open.klasy", oneAdvice("execution(f)", "if (x) { f();"))},
					env: []string{"KLASY_LAB_DIR=" + filepath.Join(dir, "labs")}}
			},
		},
		hostileCase{
			name: "check-star-in-pointcut", class: "small", want: "star.klasy:3:29: `*` is not a wildcard in a pointcut; use `%` (execution(tcp_%))",
			setup: func(t *testing.T, dir string) hostileRun {
				return hostileRun{args: []string{"check", writeAspect(t, "star.klasy", oneAdvice("execution(tcp_*)", "f();"))}}
			},
		},
	)
}

// TestAspectLimitsDocumented: the bounds are in the help of the commands
// that read aspects, as the constants say them.
func TestAspectLimitsDocumented(t *testing.T) {
	for _, help := range []string{checkHelp, translateHelp} {
		for _, want := range []string{boundedread.Size(aspect.MaxFileSize), boundedread.Size(aspect.MaxPointcut)} {
			if !strings.Contains(help, want) {
				t.Errorf("help does not give the limit %s:\n%s", want, help)
			}
		}
	}
}
