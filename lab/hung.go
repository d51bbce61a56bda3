package lab

import (
	"context"
	"io"
	"os"
	"regexp"
	"strings"
	"time"
)

// A lab whose kernel stopped (advice in an endless loop, a panic) keeps
// its QEMU running, so it looked "running" while every command timed
// out. Its console says why: the kernel's soft lockup and RCU stall
// detectors, a panic or a BUG. klasy lab status calls such a lab "hung"
// when its agent does not answer either.

// hangReport matches the console lines of a kernel that stopped.
var hangReport = regexp.MustCompile(`(watchdog: BUG: soft lockup.*|rcu: INFO: \S+ (self-)?detected stalls?.*|Kernel panic - .*|kernel BUG at .*)`)

// consoleTailBytes is how much of the console's end is searched: a
// kernel in a loop of oopses writes megabytes a minute.
const consoleTailBytes = 256 << 10

// lastHangReport is the console log's last line saying the kernel
// stopped, without its time stamp; "" if none.
func lastHangReport(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > consoleTailBytes {
		f.Seek(fi.Size()-consoleTailBytes, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	last := ""
	for _, line := range strings.Split(strings.ReplaceAll(string(b), "\r", ""), "\n") {
		if m := hangReport.FindString(line); m != "" {
			last = strings.TrimSpace(m)
		}
	}
	return last
}

// hungReason says why the lab's kernel is hung: the console's last
// report of it stopping, when the agent does not answer a ping; ""
// when the console reports nothing of the kind or the agent answers.
func (r record) hungReason() string {
	report := lastHangReport(r.consoleLog())
	if report == "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l := &Lab{rec: r}
	if l.connect(ctx, 5*time.Second) == nil {
		defer l.Close()
		if l.Client().Ping(ctx) == nil {
			return ""
		}
	}
	return "the agent does not answer and the console says: " + report
}
