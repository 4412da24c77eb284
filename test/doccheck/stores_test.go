package doccheck

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/admitfn/admitfn/functions/bundle/store/storetest"
	"github.com/admitfn/admitfn/test/testbin"
)

// docs/bundles.md's local emulators, each run as written in one bash from
// the repository's root: the emulator, its bucket, admitfn push, and the
// server make run starts, whose /readyz says what the page shows. The
// directories and ports are the test's. go install stands for the binary
// the storage tests have, and must name the version make store-deps pins;
// make run starts the server as the Makefile's run target does, in the
// background.
func TestLocalStoresDoc(t *testing.T) {
	blocks := Find(t, "docs/bundles.md", 4) // S3's steps and /readyz, GCS's steps and /readyz
	root, _ := documents(t)
	mk := makefile(t, root)
	pinned := func(variable string) string {
		m := regexp.MustCompile(`(?m)^` + variable + `\s*:=\s*(\S+)$`).FindSubmatch(mk)
		if m == nil {
			t.Fatalf("the Makefile pins no %s", variable)
		}
		return string(m[1])
	}
	for i, store := range []struct {
		name, emulator, binary, module, port string
	}{
		{"s3", "versitygw", storetest.Versitygw(t), "github.com/versity/versitygw/cmd/versitygw@" + pinned("VERSITYGW_VERSION"), "7070"},
		{"gcs", "fake-gcs-server", storetest.FakeGCSServer(t), "github.com/fsouza/fake-gcs-server@" + pinned("FAKE_GCS_VERSION"), "4443"},
	} {
		t.Run(store.name, func(t *testing.T) {
			steps, readyz := blocks[2*i], blocks[2*i+1]
			command, want, _ := strings.Cut(readyz.Text, "\n")
			if command != "$ curl http://127.0.0.1:8080/readyz" {
				t.Fatalf("%s: %q is not a request of /readyz", readyz, command)
			}
			bin, dir := t.TempDir(), t.TempDir()
			for name, target := range map[string]string{store.emulator: store.binary, "admitfn": testbin.Path(t, "admitfn")} {
				if err := os.Symlink(target, filepath.Join(bin, name)); err != nil {
					t.Fatal(err)
				}
			}
			emulator, server := freePort(t), freePort(t)
			script := strings.NewReplacer("/tmp/admitfn-s3", dir, store.port, emulator).Replace(steps.Text)
			const stand = `set -euo pipefail
go() { [ "$*" = "install $PINNED" ] || { echo "go $*: make store-deps pins $PINNED" >&2; return 1; }; }
make() { [ $# = 2 ] && [ "$1" = run ] && [ "${2%%=*}" = POLICIES ] || return 1; "$SERVER" --addr "$ADDR" --policies "${2#POLICIES=}" & }
`
			log, err := os.Create(filepath.Join(dir, "output"))
			if err != nil {
				t.Fatal(err)
			}
			defer log.Close()
			cmd := exec.Command("bash", "-c", stand+script)
			cmd.Dir, cmd.Stdout, cmd.Stderr = root, log, log // a file: the servers outlive bash
			cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "PINNED="+store.module,
				"SERVER="+testbin.Path(t, "server"), "ADDR=127.0.0.1:"+server, "HOME="+dir)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			output := func() string { out, _ := os.ReadFile(log.Name()); return string(out) }
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
			if err := cmd.Wait(); err != nil {
				t.Fatalf("%s: %v\n%s", steps, err, output())
			}
			var got string
			deadline := time.Now().Add(time.Minute) // a safety net: the server answers within seconds
			for time.Now().Before(deadline) {
				if got = get("http://127.0.0.1:" + server + "/readyz"); strings.HasPrefix(got, "ok: ") {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			age := regexp.MustCompile(`(?m), age \d+s$`)
			if age.ReplaceAllString(strings.TrimSuffix(got, "\n"), ", age Ns") != age.ReplaceAllString(strings.TrimSuffix(want, "\n"), ", age Ns") {
				t.Errorf("/readyz: %q\n%s shows %q\noutput:\n%s", got, readyz, want, output())
			}
		})
	}
}

func get(url string) string {
	resp, err := http.Get(url)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return fmt.Sprintf("%s", body)
}

func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
}
