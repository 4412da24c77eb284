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
func Command(t *testing.T, limit int64, name string, args ...string) *exec.Cmd {
	t.Helper()
	dir, limitFile := create(t)
	if err := os.WriteFile(filepath.Join(dir, limitFile), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
		t.Fatalf("set the cgroup's memory limit: %v", err)
	}
	procs := filepath.Join(dir, "cgroup.procs")
	script := fmt.Sprintf(`echo $$ > %q && exec "$@"`, procs)
	return exec.Command("/bin/sh", append([]string{"-c", script, "sh", name}, args...)...)
}

// create makes a memory cgroup for this test and returns its directory and
// the name of its limit file: cgroup v1's memory controller when mounted
// (alone or beside a v2 hierarchy), else v2 with the memory controller
// enabled for children of the root.
func create(t *testing.T) (dir, limitFile string) {
	t.Helper()
	var parent string
	switch {
	case exists("/sys/fs/cgroup/memory/memory.limit_in_bytes"):
		parent, limitFile = "/sys/fs/cgroup/memory", "memory.limit_in_bytes"
	case v2Memory("/sys/fs/cgroup"):
		parent, limitFile = "/sys/fs/cgroup", "memory.max"
	default:
		t.Skip("no cgroup memory controller to create a cgroup in")
	}
	dir = filepath.Join(parent, fmt.Sprintf("admitfn-test-%d-%d", os.Getpid(), time.Now().UnixNano()))
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
	return dir, limitFile
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// v2Memory reports whether root is a cgroup v2 hierarchy whose children get
// the memory controller.
func v2Memory(root string) bool {
	b, err := os.ReadFile(filepath.Join(root, "cgroup.subtree_control"))
	return err == nil && strings.Contains(" "+strings.TrimSpace(string(b))+" ", " memory ")
}
