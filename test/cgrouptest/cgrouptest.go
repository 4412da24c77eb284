// Package cgrouptest runs a test's child process in a memory cgroup of its
// own with a given limit, as a container runtime would, for tests of what a
// process reads of its cgroup. It needs a writable cgroup file system (root,
// as on the CI machines); tests skip where there is none.
package cgrouptest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Command is exec.Command for a process that starts inside a new memory
// cgroup limited to limit bytes: a shell moves itself into the cgroup, then
// execs name. The cgroup is removed when the test ends, after the process
// has exited.
func Command(t testing.TB, limit int64, name string, args ...string) *exec.Cmd {
	t.Helper()
	return exec.Command("/bin/sh", append([]string{"-c", `echo $$ > "$0" && exec "$@"`, procs(t, limit), name}, args...)...)
}

// LimitedCommand is Command with a CPU limit too: the process may use cpu
// CPUs' worth of time (0.25: a quarter of one), as CFS quota, as a
// platform that gives a function a share of a CPU by its memory does. It
// skips the test where no cpu cgroup can be made.
func LimitedCommand(t testing.TB, limit int64, cpu float64, name string, args ...string) *exec.Cmd {
	t.Helper()
	mem := procs(t, limit)
	return exec.Command("/bin/sh", append([]string{"-c", `echo $$ > "$0" && echo $$ > "$1" && shift && exec "$@"`, mem, cpuProcs(t, mem, cpu), name}, args...)...)
}

// Gate holds a process started by GatedCommand at the door: in its cgroup,
// not yet running name.
type Gate struct {
	joined, open *os.File // the parent's ends of the two pipes
	child        []*os.File
}

// GatedCommand is Command for timing a start: the shell joins the cgroup,
// then waits at the gate until Open lets it exec name, so that what is
// timed from Open leaves out moving into the cgroup (which cgroup v1 makes
// take milliseconds, a real container runtime's cost, not the program's).
func GatedCommand(t testing.TB, limit int64, name string, args ...string) (*exec.Cmd, *Gate) {
	t.Helper()
	joinedR, joinedW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	openR, openW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	g := &Gate{joined: joinedR, open: openW, child: []*os.File{joinedW, openR}}
	t.Cleanup(func() {
		for _, f := range append(g.child, g.joined, g.open) {
			f.Close()
		}
	})
	script := `echo $$ > "$0" && echo >&3 && read _ <&4 && exec 3>&- 4<&- "$@"`
	cmd := exec.Command("/bin/sh", append([]string{"-c", script, procs(t, limit), name}, args...)...)
	cmd.ExtraFiles = g.child // fds 3 and 4
	return cmd, g
}

// Wait returns once the started process is in its cgroup.
func (g *Gate) Wait() error {
	for _, f := range g.child { // the child holds them now
		f.Close()
	}
	if _, err := g.joined.Read(make([]byte, 1)); err != nil {
		return fmt.Errorf("the process did not join its cgroup: %w", err)
	}
	return nil
}

// Open lets the process exec its program.
func (g *Gate) Open() error {
	_, err := g.open.Write([]byte("\n"))
	return err
}

// procs makes a cgroup limited to limit bytes and returns its process list.
func procs(t testing.TB, limit int64) string {
	t.Helper()
	dir, limitFile := create(t)
	if err := os.WriteFile(filepath.Join(dir, limitFile), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
		t.Fatalf("set the cgroup's memory limit: %v", err)
	}
	return filepath.Join(dir, "cgroup.procs")
}

// create makes a memory cgroup for this test and returns its directory and
// the name of its limit file: cgroup v1's memory controller when mounted
// (alone or beside a v2 hierarchy), else v2 with the memory controller
// enabled for children of the root.
func create(t testing.TB) (dir, limitFile string) {
	t.Helper()
	var parent string
	switch {
	case exists("/sys/fs/cgroup/memory/memory.limit_in_bytes"):
		parent, limitFile = "/sys/fs/cgroup/memory", "memory.limit_in_bytes"
	case v2Controller("/sys/fs/cgroup", "memory"):
		parent, limitFile = "/sys/fs/cgroup", "memory.max"
	default:
		t.Skip("no cgroup memory controller to create a cgroup in")
	}
	return mkdirCgroup(t, parent), limitFile
}

// mkdirCgroup makes a cgroup for this test under parent, removed when the
// test ends.
func mkdirCgroup(t testing.TB, parent string) string {
	t.Helper()
	dir := filepath.Join(parent, fmt.Sprintf("admitfn-test-%d-%d", os.Getpid(), time.Now().UnixNano()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, os.ErrPermission) || errors.Is(err, os.ErrNotExist) {
			t.Skipf("cannot create a cgroup (needs root and a writable cgroup file system): %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The kernel refuses to remove a cgroup until its last process is
		// reaped; the test has waited for it, but be patient with the kernel.
		for i := 0; ; i++ {
			err := os.Remove(dir)
			if err == nil || errors.Is(err, os.ErrNotExist) {
				return
			}
			if i == 50 {
				t.Errorf("remove cgroup %s: %v", dir, err)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	return dir
}

// cpuProcs limits a process to cpu CPUs' worth of time per 100 ms period
// and returns the process list to join for it: a cgroup of cgroup v1's cpu
// controller when mounted; else, on v2, where a process is in one cgroup,
// the memory cgroup of memProcs itself, with cpu.max.
func cpuProcs(t testing.TB, memProcs string, cpu float64) string {
	t.Helper()
	const period = 100000 // µs
	quota := strconv.Itoa(int(cpu * period))
	set := func(dir, file, v string) {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(v), 0o644); err != nil {
			t.Fatalf("set the cgroup's CPU limit: %v", err)
		}
	}
	switch {
	case exists("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"):
		dir := mkdirCgroup(t, "/sys/fs/cgroup/cpu")
		set(dir, "cpu.cfs_period_us", strconv.Itoa(period))
		set(dir, "cpu.cfs_quota_us", quota)
		return filepath.Join(dir, "cgroup.procs")
	case exists(filepath.Join(filepath.Dir(memProcs), "cpu.max")):
		set(filepath.Dir(memProcs), "cpu.max", quota+" "+strconv.Itoa(period))
		return memProcs
	}
	t.Skip("no cgroup cpu controller to limit the process with")
	return ""
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// v2Controller reports whether root is a cgroup v2 hierarchy whose
// children get the controller.
func v2Controller(root, controller string) bool {
	b, err := os.ReadFile(filepath.Join(root, "cgroup.subtree_control"))
	return err == nil && strings.Contains(" "+strings.TrimSpace(string(b))+" ", " "+controller+" ")
}
