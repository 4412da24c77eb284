// Package storetest runs the real object-store servers admitfn's tests
// read bundles from, as processes on 127.0.0.1: versitygw (S3, its posix
// backend with versioning) and fake-gcs-server (GCS). Both can be stopped
// and restarted on the same port and data, and a fault-injecting proxy can
// stand in front of either.
//
// The binaries come from ADMITFN_VERSITYGW and ADMITFN_FAKE_GCS_SERVER, else
// PATH, else $GOPATH/bin (`make store-deps` installs them). When one is
// missing the test is skipped, or fails if ADMITFN_STORE_TESTS=required, as
// `make test` sets it.
package storetest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/admitfn/admitfn/test/syncbuf"
)

// Versitygw is the path of the versitygw binary ($ADMITFN_VERSITYGW).
func Versitygw(t testing.TB) string { return binary(t, "ADMITFN_VERSITYGW", "versitygw") }

// FakeGCSServer is the path of the fake-gcs-server binary
// ($ADMITFN_FAKE_GCS_SERVER).
func FakeGCSServer(t testing.TB) string {
	return binary(t, "ADMITFN_FAKE_GCS_SERVER", "fake-gcs-server")
}

// binary finds a server binary or skips (fails, when required) the test.
func binary(t testing.TB, env, name string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		return p
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		p := filepath.Join(string(bytes.TrimSpace(out)), "bin", name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	msg := fmt.Sprintf("%s not found (set %s, or run make store-deps)", name, env)
	if os.Getenv("ADMITFN_STORE_TESTS") == "required" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// freePort returns a port on 127.0.0.1 nothing listens on.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// process is a server process that can be stopped and started again with
// the same arguments.
type process struct {
	t     testing.TB
	name  string
	bin   string
	args  []string
	addr  string
	ready func() bool

	mu  sync.Mutex
	cmd *exec.Cmd
	out *syncbuf.Buffer
}

func (p *process) start() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	out := &syncbuf.Buffer{}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		p.t.Fatalf("start %s: %v", p.name, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	p.cmd, p.out = cmd, out
	const patience = 2 * time.Minute // a safety net for a loaded machine
	deadline := time.Now().Add(patience)
	for !p.ready() {
		select {
		case <-exited:
			p.t.Fatalf("%s exited at start:\n%s", p.name, out)
		default:
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			p.t.Fatalf("%s did not answer on %s within %v:\n%s", p.name, p.addr, patience, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop kills the server; Start brings it back on the same port and data.
func (p *process) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	p.cmd.Process.Kill()
	p.cmd.Process.Wait()
	p.cmd = nil
	// The port must be free again before a restart can bind it.
	for i := 0; i < 100; i++ {
		c, err := net.DialTimeout("tcp", p.addr, 100*time.Millisecond)
		if err != nil {
			return
		}
		c.Close()
		time.Sleep(20 * time.Millisecond)
	}
}

// Start restarts a stopped server.
func (p *process) Start() { p.start() }

func (p *process) logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.out == nil {
		return ""
	}
	return p.out.String()
}

func httpUp(url string) func() bool {
	return func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return true
	}
}

func addr(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }
