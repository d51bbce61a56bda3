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

// Hostile <replace> advice (issue 13, "Bad input"): a replacement that
// does not return on every path is a compile error at the aspect's own
// line, in one line, and nothing reaches the kernel. The advice compiles
// against a kernel's headers, so the case weaves into a lab of Debian's
// kernel.
func init() {
	hostileCases = append(hostileCases, hostileCase{
		name: "weave-replace-not-returning", class: "wrong",
		want: "a.klasy:7:5: advice does not compile: control reaches end of non-void function",
		setup: func(t *testing.T, dir string) hostileRun {
			l := labboot.Boot(t, lab.Config{Name: labboot.Name("hostile-replace"), Kernel: lab.Debian})
			p := filepath.Join(dir, "a.klasy")
			src := `<aspect>
  <advice>
    <pointcut>execution(ksys_lseek) AND argument(whence, w)</pointcut>
    <replace>
      if (*(unsigned int *)w == 0)
        return 0;
    </replace>
  </advice>
</aspect>
`
			if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			// The lab's kernel, image and built runtime are in the
			// shared cache: the run's own cache would have none.
			return hostileRun{args: []string{"weave", "--lab", l.Name(), p}, env: []string{"KLASY_CACHE=" + cachedir.Root()},
				timeout: 3 * time.Minute,
				after: func(t *testing.T, _ []byte) {
					res, err := l.Client().Run(t.Context(), []string{"sh", "-c", "cut -d' ' -f1 /proc/modules | grep klasy; true"}, nil)
					if err != nil || len(res.Stdout) > 0 {
						t.Errorf("modules of klasy in the lab after the failed weave: %q, %v", res.Stdout, err)
					}
				}}
		},
	})
}
