package kbuild

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A build's temporary directory names its owner (ownerFile: the pid and
// start time of the process that made it), so that the next build can
// tell a directory whose owner was killed (kill -9 leaves no chance to
// clean up) from one in use, and remove it with whatever of its build
// still runs: make dies with its owner (Pdeathsig), but the compilers it
// started run on in its process group.
const ownerFile = ".klasy-owner"

// tempPrefix starts the name of every build's temporary directory.
const tempPrefix = "klasy-kbuild-"

// keptFile marks a build's directory kept for its caller (Options.Keep):
// neither a build's nor stale.
const keptFile = ".klasy-kept"

// unownedAge is how old a build directory without an owner record (an
// older klasy made it, which wrote none) must be to be removed, when no
// process names it: no module build takes that long, and a directory
// being made right now has no record yet either.
const unownedAge = time.Hour

// writeOwner records this process as dir's owner.
func writeOwner(dir string) error {
	start, err := startTime(os.Getpid())
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ownerFile), fmt.Appendf(nil, "%d %s\n", os.Getpid(), start), 0o644)
}

// startTime is field 22 of /proc/PID/stat: with the pid, it names one
// process, not a later one given the same pid.
func startTime(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	// The command name, in parentheses, may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return "", fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	return f[19], nil
}

// ownerGone reports whether dir has an owner record naming a process
// that no longer runs. A directory without one (an older klasy's, or
// one being made right now) is stale once it is unownedAge old and no
// process names it; one kept for its caller never is.
func ownerGone(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, ownerFile))
	if errors.Is(err, os.ErrNotExist) {
		if _, err := os.Stat(filepath.Join(dir, keptFile)); err == nil {
			return false
		}
		st, err := os.Stat(dir)
		return err == nil && time.Since(st.ModTime()) > unownedAge && len(namedBy(dir)) == 0
	}
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return false
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil || pid <= 0 {
		return false
	}
	start, err := startTime(pid)
	return errors.Is(err, os.ErrNotExist) || err == nil && start != f[1]
}

// RemoveStale removes the temporary build directories under os.TempDir
// whose owner is gone, after killing what of their builds still runs.
// Build calls it before each build; it returns the directories removed.
func RemoveStale() []string {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), tempPrefix+"*"))
	var removed []string
	for _, dir := range dirs {
		if !ownerGone(dir) {
			continue
		}
		killBuild(dir)
		if os.RemoveAll(dir) == nil {
			removed = append(removed, dir)
		}
	}
	return removed
}

// killBuild kills the process groups of the processes whose command line
// names dir: a build's make ran in a group of its own, which holds its
// shells and compilers and nothing else.
func killBuild(dir string) {
	for _, pid := range namedBy(dir) {
		// Every build runs make in a group of its own (runMake), so the
		// group holds that build's processes only; never our own group.
		if pgid, err := syscall.Getpgid(pid); err == nil && pgid > 1 && pgid != syscall.Getpgrp() {
			syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}
}

// namedBy lists the processes whose command line names dir.
func namedBy(dir string) []int {
	var pids []int
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range cmdlines {
		b, err := os.ReadFile(p)
		if err != nil || !names(b, dir) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// names reports whether the command line b holds the path dir, not
// merely a longer name starting with it (klasy-kbuild-12 in
// klasy-kbuild-123).
func names(b []byte, dir string) bool {
	for i := 0; ; {
		j := bytes.Index(b[i:], []byte(dir))
		if j < 0 {
			return false
		}
		end := i + j + len(dir)
		if end == len(b) || b[end] < '0' || b[end] > '9' {
			return true
		}
		i = end
	}
}
