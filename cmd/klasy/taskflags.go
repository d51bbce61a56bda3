package main

import "github.com/klasy/klasy/weaver/taskfilter"

// taskFlags are klasy weave's filters, done in the kernel: the tasks the
// advice runs for (weaver/taskfilter).
type taskFlags struct {
	f taskfilter.Filter
}

func (t *taskFlags) declare(fs *flagSet) {
	fs.IntVar(&t.f.PID, "pid", 0, "")
	fs.StringVar(&t.f.Comm, "comm", "", "")
	fs.BoolVar(&t.f.IncludeSelf, "include-self", false, "")
}

// filter is the filter asked for, or a usage error.
func (t *taskFlags) filter(fs *flagSet) (taskfilter.Filter, error) {
	if fs.Given("pid") && t.f.PID <= 0 {
		return t.f, usageError{Msg: "--pid: want a process id from 1 up"}
	}
	if fs.Given("comm") && t.f.Comm == "" {
		return t.f, usageError{Msg: "--comm: want a command name, as ps shows it"}
	}
	if err := t.f.Check(); err != nil {
		return t.f, usageError{Msg: err.Error()}
	}
	return t.f, nil
}
