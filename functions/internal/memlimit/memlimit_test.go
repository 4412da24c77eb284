package memlimit

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/admitfn/admitfn/test/cgrouptest"
)

// childEnv makes the test binary a child that prints what Cgroup reads and
// exits, for TestCgroupReadsItsLimit.
const childEnv = "ADMITFN_MEMLIMIT_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		b, ok, err := Cgroup().Read()
		out, _ := json.Marshal(map[string]any{"bytes": b, "ok": ok, "err": fmt.Sprint(err)})
		fmt.Println(string(out))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// keepLimit restores the runtime's soft memory limit after a test sets it.
func keepLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
}

func fixed(name string, b uint64, ok bool, err error) Source {
	return Source{Name: name, Read: func() (uint64, bool, error) { return b, ok, err }}
}

func TestApply(t *testing.T) {
	keepLimit(t)
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	broken := errors.New("unreadable")
	for _, c := range []struct {
		name    string
		getenv  func(string) string
		sources func(getenv func(string) string) []Source
		want    Limit
		wantErr string
	}{
		{"lambda 128 MB", env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128"), lambda, Limit{Bytes: 128 << 20 / 10 * 9, From: "lambda"}, ""},
		{"lambda 10240 MB", env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "10240"), lambda, Limit{Bytes: 10240 << 20 / 10 * 9, From: "lambda"}, ""},
		{"lambda without the variable", env(), lambda, Limit{}, ""},
		{"lambda, not a number", env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "lots"), lambda, Limit{}, `AWS_LAMBDA_FUNCTION_MEMORY_SIZE "lots" is not a size in MiB`},
		{"lambda, negative", env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "-1"), lambda, Limit{}, `AWS_LAMBDA_FUNCTION_MEMORY_SIZE "-1" is not a size in MiB`},
		{"lambda, zero", env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "0"), lambda, Limit{}, `AWS_LAMBDA_FUNCTION_MEMORY_SIZE "0" is not a size in MiB`},
		{"no sources", env(), none, Limit{}, ""},
		{"first that knows", env(), func(func(string) string) []Source {
			return []Source{fixed("a", 0, false, nil), fixed("b", 1000, true, nil), fixed("c", 2000, true, nil)}
		}, Limit{Bytes: 900, From: "b"}, ""},
		{"a failing source is skipped and reported", env(), func(func(string) string) []Source {
			return []Source{fixed("a", 0, false, broken), fixed("b", 512<<20, true, nil)}
		}, Limit{Bytes: 512 << 20 / 10 * 9, From: "b"}, "unreadable"},
		{"an absurd limit is none", env(), func(func(string) string) []Source {
			return []Source{fixed("a", math.MaxInt64&^4095, true, nil)}
		}, Limit{}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			debug.SetMemoryLimit(math.MaxInt64)
			got, err := Apply(c.getenv, c.sources(c.getenv)...)
			if fmt.Sprint(err) != fmt.Sprint(errOrNil(c.wantErr)) {
				t.Errorf("error %v, want %q", err, c.wantErr)
			}
			if got != c.want {
				t.Errorf("limit %+v, want %+v", got, c.want)
			}
			want := c.want.Bytes
			if !c.want.Set() {
				want = math.MaxInt64
			}
			if rt := debug.SetMemoryLimit(-1); rt != want {
				t.Errorf("runtime limit %d, want %d", rt, want)
			}
		})
	}
}

func lambda(getenv func(string) string) []Source { return []Source{Lambda(getenv)} }
func none(func(string) string) []Source          { return nil }

func errOrNil(s string) error {
	if s == "" {
		return nil
	}
	return errors.New(s)
}

// GOMEMLIMIT rules: the runtime's limit is reported as it is and no source
// is read.
func TestGOMEMLIMITRules(t *testing.T) {
	keepLimit(t)
	debug.SetMemoryLimit(300 << 20)
	read := false
	got, err := Apply(func(k string) string {
		if k == "GOMEMLIMIT" {
			return "300MiB"
		}
		return ""
	}, Source{Name: "a", Read: func() (uint64, bool, error) { read = true; return 1 << 30, true, nil }})
	if err != nil || got != (Limit{Bytes: 300 << 20, From: "GOMEMLIMIT"}) || read {
		t.Errorf("Apply = %+v, %v; source read: %v", got, err, read)
	}
}

// Under a limit the heap may grow to half of it, paced between GOGC 100 and
// 400; without one, or with GOGC in the environment, the pace is left alone.
func TestGCPercent(t *testing.T) {
	keepLimit(t)
	limit := Limit{Bytes: 200 << 20, From: "lambda"}
	for _, c := range []struct {
		name    string
		limit   Limit
		live    uint64
		percent int
		ok      bool
	}{
		{"half the limit is 2.5 times what is live", limit, 40 << 20, 150, true},
		{"half the limit is 3 times what is live, to the byte", limit, 100 << 20 / 3, 200, true},
		{"a small heap stops at 400", limit, 10 << 20, 400, true},
		{"a heap near half the limit collects as by default", limit, 90 << 20, 100, true},
		{"a heap over the limit collects as by default", limit, 300 << 20, 100, true},
		{"nothing live yet", limit, 0, 400, true},
		{"no limit", Limit{}, 10 << 20, 0, false},
		{"GOMEMLIMIT=off", Limit{Bytes: math.MaxInt64, From: "GOMEMLIMIT"}, 10 << 20, 0, false},
	} {
		if p, ok := c.limit.GCPercent(c.live); p != c.percent || ok != c.ok {
			t.Errorf("%s: GCPercent = %d, %v; want %d, %v", c.name, p, ok, c.percent, c.ok)
		}
	}
	for env, tunes := range map[string]bool{"": true, "50": false, "off": false} {
		l, err := Apply(func(k string) string {
			return map[string]string{"GOGC": env, "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512"}[k]
		}, Lambda(func(string) string { return "512" }))
		if err != nil || !l.Set() {
			t.Fatalf("Apply: %+v, %v", l, err)
		}
		if _, ok := l.GCPercent(10 << 20); ok != tunes {
			t.Errorf("GOGC=%q: paces the collector %v, want %v", env, ok, tunes)
		}
	}
}

func TestLog(t *testing.T) {
	var buf strings.Builder
	log := zerolog.New(&buf)
	Limit{Bytes: 460 << 20, From: "lambda"}.Log(log.Info()).Msg("ready")
	Limit{}.Log(log.Info()).Msg("ready")
	want := `{"level":"info","memory_limit_mib":460,"memory_limit_from":"lambda","message":"ready"}` + "\n" +
		`{"level":"info","message":"ready"}` + "\n"
	if buf.String() != want {
		t.Errorf("log lines:\n%s\nwant:\n%s", buf.String(), want)
	}
}

// A process in a memory cgroup reads its limit, as in a container: the test
// binary runs itself in a new cgroup limited to 256 MiB.
func TestCgroupReadsItsLimit(t *testing.T) {
	cmd := cgrouptest.Command(t, 256<<20, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var got struct {
		Bytes uint64
		OK    bool
		Err   string
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("child output %q: %v", out, err)
	}
	if got.Bytes != 256<<20 || !got.OK || got.Err != "<nil>" {
		t.Errorf("Cgroup().Read() in a 256 MiB cgroup = %+v", got)
	}
}
