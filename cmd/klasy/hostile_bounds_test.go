package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/klasy/klasy/internal/cachedir"
	"github.com/klasy/klasy/lab"
	"github.com/klasy/klasy/lab/labboot"
)

// Unbounded weaves (issue 21, "unbounded work"): execution(m%) selects
// about 7,000 join points, which had no bound and no word until gcc and
// the load were done minutes later. The bounds refuse before anything
// is built, naming the flag that raises them; each case lowers one bound
// under that aspect. Resolving needs the running kernel: a lab.
func init() {
	bounded := func(name, want string, flags ...string) hostileCase {
		return hostileCase{
			name: name, class: "unbounded", want: want,
			setup: func(t *testing.T, dir string) hostileRun {
				l := labboot.Boot(t, lab.Config{Name: labboot.Name("bounds"), Kernel: lab.Debian})
				p := filepath.Join(dir, "m_all.klasy")
				src := "<aspect>\n  <advice>\n    <pointcut>execution(m%)</pointcut>\n    <before></before>\n  </advice>\n</aspect>\n"
				if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
					t.Fatal(err)
				}
				args := append(append([]string{"weave", "--lab", l.Name()}, flags...), p)
				return hostileRun{args: args, env: []string{"KLASY_CACHE=" + cachedir.Root()}, timeout: 3 * time.Minute,
					after: func(t *testing.T, _ []byte) {
						res, err := l.Client().Run(t.Context(), []string{"sh", "-c", "cut -d' ' -f1 /proc/modules | grep klasy; true"}, nil)
						if err != nil || len(res.Stdout) > 0 {
							t.Errorf("modules of klasy in the lab after the refused weave: %q, %v", res.Stdout, err)
						}
					}}
			},
		}
	}
	hostileCases = append(hostileCases,
		bounded("weave-join-points-bounded", "more than the 1000 a weave may have", "--max-join-points", "1000"),
		bounded("weave-c-size-bounded", "MiB of C, more than the 1 MiB a weave may generate", "--max-c-mb", "1"),
		// gcc's time (a 939 KiB aspect was still compiling after 400 s):
		// 7 MiB of C do not build in 5 s.
		bounded("weave-build-time-bounded", "took more than the 5s a weave may build for, and was stopped", "--max-build-time", "5s"),
	)
}
