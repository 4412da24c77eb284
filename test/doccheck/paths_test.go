package doccheck

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/admitfn/admitfn/test/soak"
	"github.com/admitfn/admitfn/test/syncbuf"
	"github.com/admitfn/admitfn/test/testbin"
)

// CONTRIBUTING's review paths name every file of the repository whose
// code runs for one review through the server, as coverage counts it: the
// server built with -cover runs the same review twice, then three times;
// the files whose counts the third review raised are the path (the first
// two warm caches and plan programs). The reload path is the files whose
// counts a reload raised: the server started and left alone, against the
// same with a policy changed and a SIGHUP. A file added to or gone from a
// path fails here, with the list to paste.
func TestContributingReviewPaths(t *testing.T) {
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "server")
	// The tests' binaries' configuration (testbin.Flags, no cgo), so the
	// dependencies compiled for them are reused: only admitfn's own
	// packages are compiled again, with counters.
	args := append([]string{"build"}, testbin.Flags...)
	build := exec.Command("go", append(args, "-cover", "-covermode=atomic", "-coverpkg=github.com/admitfn/admitfn/...", "-o", bin, "./functions/server")...)
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -cover: %v\n%s", err, out)
	}
	cases, err := soak.ExampleCases(filepath.Join(root, "adapters/httpadapter/testdata"), filepath.Join(root, "policies/examples"))
	if err != nil {
		t.Fatal(err)
	}
	contributing, err := os.ReadFile(filepath.Join(root, "CONTRIBUTING.md"))
	if err != nil {
		t.Fatal(err)
	}
	examples := filepath.Join(root, "policies/examples")
	for _, path := range []struct{ heading, review string }{
		{"One validating review", "basic-deny"},
		{"One mutating review", "mutate-sidecar"},
	} {
		i := slices.IndexFunc(cases, func(c soak.Case) bool { return c.Name == path.review })
		if i < 0 {
			t.Fatalf("no golden review %s", path.review)
		}
		c := cases[i]
		review := func(n int) func(*testing.T, string, *exec.Cmd, *syncbuf.Buffer) {
			return func(t *testing.T, base string, _ *exec.Cmd, _ *syncbuf.Buffer) {
				for range n {
					resp, err := http.Post(base+c.Route, "application/json", bytes.NewReader(c.Body))
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						t.Fatalf("%s: HTTP %d", c.Name, resp.StatusCode)
					}
				}
			}
		}
		before := coverCounts(t, bin, examples, review(2))
		after := coverCounts(t, bin, examples, review(3))
		checkPath(t, string(contributing), path.heading, fmt.Sprintf("the review (%s)", c.Route), before, after)
	}

	// A reload: the server started on a copy of the example bundle and
	// left alone, against the same with one policy changed and a SIGHUP,
	// which checks the store at once.
	policies := filepath.Join(t.TempDir(), "policies")
	if err := os.CopyFS(policies, os.DirFS(examples)); err != nil {
		t.Fatal(err)
	}
	before := coverCounts(t, bin, policies, func(*testing.T, string, *exec.Cmd, *syncbuf.Buffer) {})
	after := coverCounts(t, bin, policies, func(t *testing.T, _ string, cmd *exec.Cmd, logs *syncbuf.Buffer) {
		file := filepath.Join(policies, "01-basic.yaml")
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, bytes.Replace(data, []byte("object.spec.replicas <= 5"), []byte("object.spec.replicas <= 6"), 1), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		waitLog(t, logs, `"changed":true,`)
	})
	checkPath(t, string(contributing), "One reload from a store", "the reload", before, after)
}

// checkPath holds the list after heading to the files whose coverage
// counts rose from before to after.
func checkPath(t *testing.T, contributing, heading, what string, before, after map[string]int) {
	t.Helper()
	var ran []string
	for block, n := range after {
		if n > before[block] {
			file, _, _ := strings.Cut(block, ":")
			if rel, ok := strings.CutPrefix(file, "github.com/admitfn/admitfn/"); ok && !slices.Contains(ran, rel) {
				ran = append(ran, rel)
			}
		}
	}
	slices.Sort(ran)
	listed := reviewPath(contributing, heading)
	slices.Sort(listed)
	if !slices.Equal(ran, listed) {
		var want strings.Builder
		for _, f := range ran {
			fmt.Fprintf(&want, "- `%s`\n", f)
		}
		t.Errorf("CONTRIBUTING.md, %q: lists %v; %s ran these %d files:\n%s", heading, listed, what, len(ran), want.String())
	}
}

// waitLog waits for a log line holding s.
func waitLog(t *testing.T, logs *syncbuf.Buffer, s string) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); !strings.Contains(logs.String(), s); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s in the logs:\n%s", s, logs.String())
		}
	}
}

// reviewPath is the files the list after heading names.
func reviewPath(doc, heading string) []string {
	_, rest, ok := strings.Cut(doc, heading)
	if !ok {
		return nil
	}
	// An item names its files before its colon: "- `a.go`, `b.go`: what".
	item := regexp.MustCompile("^- ((?:`[^`]+`(?:, )?)+):")
	name := regexp.MustCompile("`([^`]+)`")
	var files []string
	started := false
	for _, line := range strings.Split(rest, "\n")[1:] {
		m := item.FindStringSubmatch(line)
		switch {
		case m != nil:
			for _, f := range name.FindAllStringSubmatch(m[1], -1) {
				files = append(files, f[1])
			}
			started = true
		case started && strings.TrimSpace(line) == "":
			return files
		case started && !strings.HasPrefix(line, " "):
			return files
		}
	}
	return files
}

// coverCounts runs the server built with coverage on the bundle in
// policies, has act work it once its bundle has settled, stops it and
// returns its coverage counts by block.
func coverCounts(t *testing.T, bin, policies string, act func(t *testing.T, base string, cmd *exec.Cmd, logs *syncbuf.Buffer)) map[string]int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	cmd := exec.Command(bin, "--addr", addr, "--policies", policies, "--refresh-interval", "0", "--log-level", "debug")
	cmd.Env = append(os.Environ(), "GOCOVERDIR="+dir)
	logs := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	// The bundle's background work (client-go's schema, for the example
	// bundle's ApplyConfiguration policies) done, so none runs beside the
	// work measured.
	waitLog(t, logs, `"message":"bundle settled`)
	act(t, "http://"+addr, cmd, logs)
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the server's exit: %v\n%s", err, logs.String())
	}
	out := filepath.Join(dir, "profile.txt")
	if b, err := exec.Command("go", "tool", "covdata", "textfmt", "-i", dir, "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("go tool covdata: %v\n%s", err, b)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, line := range strings.Split(string(data), "\n") {
		// github.com/admitfn/admitfn/core/engine/engine.go:12.3,14.2 2 1
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		var k int
		fmt.Sscan(f[2], &k)
		counts[f[0]] += k
	}
	return counts
}
