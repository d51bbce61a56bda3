package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klasy/klasy/domains"
)

// Hostile domains files (issue 21): every YAML document checked, a bound
// on the file's size and on its domains, and errors that quote a short
// prefix of a long value. Each is refused before any lab or agent is
// looked at.
func init() {
	labDir := func(dir string) []string { return []string{"KLASY_LAB_DIR=" + filepath.Join(dir, "labs")} }
	twoLabs := "domains:\n  - name: a\n    lab: a\n  - name: b\n    lab: b\n"
	hostileCases = append(hostileCases,
		hostileCase{
			name: "domains-second-document", class: "wrong", want: "d.yaml:6: a second YAML document (after ---): a domains file is one document",
			setup: func(t *testing.T, dir string) hostileRun {
				p := writeFile(t, dir, "d.yaml", twoLabs+"---\ndomains:\n  - name: c\n    lab: c\n")
				return hostileRun{args: []string{"status", "--domains", p}, env: labDir(dir)}
			},
		},
		hostileCase{
			name: "agent-keys-second-document", class: "wrong", want: "d.yaml:6: a second YAML document",
			setup: func(t *testing.T, dir string) hostileRun {
				p := writeFile(t, dir, "d.yaml", twoLabs+"---\n")
				return hostileRun{args: []string{"agent", "keys", p}}
			},
		},
		hostileCase{
			name: "domains-file-of-comments", class: "unbounded", want: "big.yaml: larger than the 1 MiB limit for a domains file",
			setup: func(t *testing.T, dir string) hostileRun {
				p := writeFile(t, dir, "big.yaml", twoLabs+strings.Repeat("# all work and no play\n", 2*domains.MaxFileSize/23))
				return hostileRun{args: []string{"status", "--domains", p}, env: labDir(dir), timeout: 5 * time.Second, maxRSS: 64}
			},
		},
		hostileCase{
			name: "agent-keys-dev-zero", class: "unbounded", want: "/dev/zero: a character device, not a regular file or a pipe",
			setup: func(t *testing.T, dir string) hostileRun {
				return hostileRun{args: []string{"agent", "keys", "/dev/zero"}, timeout: 5 * time.Second, maxRSS: 64}
			},
		},
		hostileCase{
			name: "domains-too-many", class: "unbounded", want: fmt.Sprintf("many.yaml:%d: domain %d: more than the limit of %d domains", domains.MaxDomains+2, domains.MaxDomains+1, domains.MaxDomains),
			setup: func(t *testing.T, dir string) hostileRun {
				var b strings.Builder
				b.WriteString("domains:\n")
				for i := range 20000 {
					fmt.Fprintf(&b, "  - {name: d%d, lab: l%d}\n", i, i)
				}
				p := writeFile(t, dir, "many.yaml", b.String())
				return hostileRun{args: []string{"weave", "--domains", p, writeAspect(t, "a.klasy", oneAdvice("execution(f)", "f();"))},
					env: labDir(dir), timeout: 5 * time.Second, maxRSS: 128}
			},
		},
		hostileCase{
			name: "domains-long-value", class: "small", want: `long.yaml:2: domain name "` + strings.Repeat("x", domains.MaxQuote) + `…": use a letter`,
			setup: func(t *testing.T, dir string) hostileRun {
				p := writeFile(t, dir, "long.yaml", "domains:\n  - name: "+strings.Repeat("x", domains.MaxFileSize-100)+"\n    lab: b\n")
				return hostileRun{args: []string{"status", "--domains", p}, env: labDir(dir), timeout: 5 * time.Second,
					afterErr: func(t *testing.T, stderr string) {
						if len(stderr) > 400 {
							t.Errorf("stderr of %d bytes quotes the value whole", len(stderr))
						}
					}}
			},
		},
	)
}
