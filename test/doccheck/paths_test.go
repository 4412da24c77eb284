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
// two warm caches and plan programs). A file added to or gone from a
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
	for _, path := range []struct{ heading, review string }{
		{"One validating review", "basic-deny"},
		{"One mutating review", "mutate-sidecar"},
	} {
		i := slices.IndexFunc(cases, func(c soak.Case) bool { return c.Name == path.review })
		if i < 0 {
			t.Fatalf("no golden review %s", path.review)
		}
		c := cases[i]
		before := coverCounts(t, bin, root, c, 2)
		after := coverCounts(t, bin, root, c, 3)
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
		listed := reviewPath(string(contributing), path.heading)
		slices.Sort(listed)
		if !slices.Equal(ran, listed) {
			var want strings.Builder
			for _, f := range ran {
				fmt.Fprintf(&want, "- `%s`\n", f)
			}
			t.Errorf("CONTRIBUTING.md, %q: lists %v; the review (%s) ran these %d files:\n%s", path.heading, listed, c.Route, len(ran), want.String())
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

// coverCounts runs the server built with coverage on the example bundle,
// sends it c n times, stops it and returns its coverage counts by block.
func coverCounts(t *testing.T, bin, root string, c soak.Case, n int) map[string]int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	cmd := exec.Command(bin, "--addr", addr, "--policies", filepath.Join(root, "policies/examples"), "--refresh-interval", "0", "--log-level", "debug")
	cmd.Env = append(os.Environ(), "GOCOVERDIR="+dir)
	logs := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	base := "http://" + addr
	// The bundle's background work (client-go's schema, for the example
	// bundle's ApplyConfiguration policies) done, so none runs beside the
	// reviews.
	for deadline := time.Now().Add(2 * time.Minute); !strings.Contains(logs.String(), `"message":"bundle settled`); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the server did not settle:\n%s", logs.String())
		}
	}
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
