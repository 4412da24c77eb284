package startup

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/admitfn/admitfn/core/mutate"
	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/functions/bundle"
	"github.com/admitfn/admitfn/functions/bundle/store"
	"github.com/admitfn/admitfn/functions/internal/memlimit"
	"github.com/admitfn/admitfn/test/syncbuf"
)

func TestConfigFromEnv(t *testing.T) {
	env := map[string]string{
		"ADMITFN_FALLBACK_POLICIES": "/opt/fallback", "ADMITFN_BUNDLE_PUBLIC_KEY": "k",
		"ADMITFN_REFRESH_INTERVAL": "2m", "ADMITFN_S3_PATH_STYLE": "true", "ADMITFN_EXACT_COST": "true",
	}
	c, err := ConfigFromEnv(func(k string) string { return env[k] }, "/var/task/policies")
	want := Config{Policies: "/var/task/policies", Fallback: "/opt/fallback", PublicKey: "k", PublicKeySet: true, Interval: 2 * time.Minute, S3PathStyle: true, ExactCost: true}
	if err != nil || !reflect.DeepEqual(c, want) {
		t.Fatalf("%+v %v, want %+v", c, err, want)
	}
	if !c.Compiler().TracksEveryCost() || (Config{}).Compiler().TracksEveryCost() {
		t.Error("ADMITFN_EXACT_COST does not choose the compiler")
	}
	env = map[string]string{"ADMITFN_POLICIES": "s3://b/p", "ADMITFN_REFRESH_INTERVAL": "0"}
	if c, err := ConfigFromEnv(func(k string) string { return env[k] }, "x"); err != nil || c.Policies != "s3://b/p" || c.Interval >= 0 {
		t.Fatalf("refresh off: %+v %v", c, err)
	}
	for value, want := range map[string]string{
		"ADMITFN_REFRESH_INTERVAL=-1s":  `refresh interval "-1s": want a duration such as 30s, or 0 to turn refresh off`,
		"ADMITFN_REFRESH_INTERVAL=10ms": `refresh interval "10ms": at least 1s`,
		"ADMITFN_S3_PATH_STYLE=yes":     `ADMITFN_S3_PATH_STYLE="yes": want true or false`,
		"ADMITFN_EXACT_COST=1":          `ADMITFN_EXACT_COST="1": want true or false`,
	} {
		k, v, _ := strings.Cut(value, "=")
		if _, err := ConfigFromEnv(func(name string) string { return map[string]string{k: v}[name] }, "x"); err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %q", value, err, want)
		}
	}
}

// gcPercent is the collector's GOGC now, as the runtime reports it.
func gcPercent() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}

// Start leaves GOGC as it found it (memlimit.Collector collects rarely
// while the first bundle loads).
func TestStartRestoresGCPercent(t *testing.T) {
	defer debug.SetGCPercent(gcPercent())
	debug.SetGCPercent(70)
	if _, err := Start(context.Background(), Config{Policies: "../../../policies/examples"}, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	if got := gcPercent(); got != 70 {
		t.Errorf("GOGC %d after Start, want 70", got)
	}
}

// Under a memory limit the collector is paced to it after the load: the
// example bundle's heap is a few MiB, so a 64 GiB limit gives the most
// headroom (400) and a 1 MiB one the default (100).
func TestPacedToTheMemoryLimit(t *testing.T) {
	defer debug.SetGCPercent(gcPercent())
	// The example bundle's mutations need client-go's schema: parsed here,
	// no load leaves a goroutine behind to pace the collector again later.
	mutate.Warm()
	for _, c := range []struct {
		limit int64
		want  int
	}{{64 << 30, 400}, {1 << 20, 100}} {
		debug.SetGCPercent(70)
		var logs syncbuf.Buffer
		limit := memlimit.Limit{Bytes: c.limit, From: "lambda"}
		if _, err := Start(context.Background(), Config{Policies: "../../../policies/examples", MemoryLimit: limit}, zerolog.New(&logs)); err != nil {
			t.Fatal(err)
		}
		if got := gcPercent(); got != c.want {
			t.Errorf("limit %d MiB: GOGC %d after Start, want %d", c.limit>>20, got, c.want)
		}
		line := fmt.Sprintf(`"gc_percent":%d,`, c.want)
		if n := strings.Count(logs.String(), line); n != 1 || !strings.Contains(logs.String(), `"message":"collector paced to the memory limit"`) {
			t.Errorf("limit %d MiB: %d lines with %s:\n%s", c.limit>>20, n, line, logs.String())
		}
	}
}

// Settled runs once: when the first bundle is loaded and nothing it started
// runs in the background (client-go's schema parsed already here), not on a
// reload.
func TestSettledOnce(t *testing.T) {
	mutate.Warm()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("../../../policies/examples")); err != nil {
		t.Fatal(err)
	}
	settled := 0
	r, err := Start(context.Background(), Config{Policies: dir, Settled: func() { settled++ }}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if settled != 1 {
		t.Fatalf("settled %d times by Start, want 1", settled)
	}
	first := r.Engine().BundleID()
	f, err := os.OpenFile(filepath.Join(dir, "02-params.yaml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("\n# changed\n")
	f.Close()
	if err := r.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r.Engine().BundleID() == first {
		t.Fatalf("no reload: bundle %s still", first)
	}
	if settled != 1 {
		t.Errorf("settled %d times after a reload, want 1", settled)
	}
}

// A bundle admitfn push compiled with this build starts without compiling
// and compiles in the background; Settled runs when that is done. A
// policy that does not compile is logged, and fails by its failurePolicy.
func TestPushedBundleCompilesInTheBackground(t *testing.T) {
	for _, tc := range []struct {
		name, policies, logged string
	}{
		{"examples", "../../../policies/examples", ""},
		{"broken", "", `"level":"error","error":"1 error in policy bundle:\n  p.yaml: policy p: spec.validations[0].expression: compilation failed`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sources []policy.Source
			if tc.policies != "" {
				var err error
				if sources, err = policy.ReadFS(os.DirFS(tc.policies), "."); err != nil {
					t.Fatal(err)
				}
			} else {
				sources = []policy.Source{{Name: "p.yaml", Data: []byte("apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {name: p}\nspec:\n  matchConstraints: {resourceRules: [{apiGroups: [''], apiVersions: [v1], operations: [CREATE], resources: [pods]}]}\n  validations:\n  - expression: 'object.spec +'\n")}}
			}
			b, err := policy.Parse(sources)
			if err != nil {
				t.Fatal(err)
			}
			all := len(b.Policies) + len(b.MutatingPolicies)
			dir := t.TempDir()
			tc2 := bundle.ThisToolchain()
			if _, err := bundle.Publish(t.Context(), store.NewDir(dir), sources, bundle.PublishOptions{CompiledBy: &tc2}); err != nil {
				t.Fatal(err)
			}
			var logs syncbuf.Buffer
			settled := make(chan struct{})
			defer debug.SetGCPercent(gcPercent())
			debug.SetGCPercent(70)
			r, err := Start(t.Context(), Config{Policies: dir, Settled: func() { close(settled) }}, zerolog.New(&logs))
			if err != nil {
				t.Fatal(err)
			}
			// The collector runs rarely until the background compile ends:
			// read before the count, a GOGC read while policies were left
			// to compile is the loading one.
			gogc := gcPercent()
			if left := r.Engine().Uncompiled(); left > 0 && gogc != memlimit.LoadGCPercent {
				t.Errorf("GOGC %d with %d policies left to compile, want %d", gogc, left, memlimit.LoadGCPercent)
			}
			<-settled
			if got := gcPercent(); got != 70 {
				t.Errorf("GOGC %d once settled, want 70", got)
			}
			if n := r.Engine().Uncompiled(); n != 0 || !strings.Contains(logs.String(), `"compile_on_use":`+strconv.Itoa(all)) {
				t.Errorf("settled with %d policies uncompiled; logs:\n%s", n, logs.String())
			}
			if tc.logged != "" && !strings.Contains(logs.String(), tc.logged) || tc.logged == "" && strings.Contains(logs.String(), `"level":"error"`) {
				t.Errorf("logs:\n%s\nwant %q", logs.String(), tc.logged)
			}
		})
	}
}

func TestStartFromADirectory(t *testing.T) {
	var logs syncbuf.Buffer
	r, err := Start(context.Background(), Config{Policies: "../../../policies/examples"}, zerolog.New(&logs))
	if err != nil {
		t.Fatal(err)
	}
	if r.Engine() == nil || r.Status().Fallback {
		t.Fatalf("status %+v", r.Status())
	}
	// One line per policy group, after the load line; no manifest warning
	// for a directory.
	if n := strings.Count(logs.String(), `"message":"policy group"`); n != len(r.Engine().Groups()) {
		t.Errorf("%d group lines for %d groups", n, len(r.Engine().Groups()))
	}
	if strings.Contains(logs.String(), "no manifest") {
		t.Errorf("manifest warning for a directory:\n%s", logs.String())
	}
}

const noKey = "configuration error: ADMITFN_BUNDLE_PUBLIC_KEY is set but holds no key: set it to the public keys bundles must be signed with, or unset it to load unsigned bundles"

// The ready line says whether bundles must be signed, and by which keys.
func TestReadySaysWhetherSignaturesAreRequired(t *testing.T) {
	_, k, _ := ed25519.GenerateKey(rand.Reader)
	pub := k.Public().(ed25519.PublicKey)
	for name, tc := range map[string]struct {
		key  string
		want string
	}{
		"no key": {"", `"signatures_required":false,`},
		"a key":  {base64.StdEncoding.EncodeToString(pub), `"signatures_required":true,"bundle_keys":["` + bundle.KeyID(pub) + `"],`},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := Config{Policies: "../../../policies/examples", PublicKey: tc.key}
			var logs syncbuf.Buffer
			log := zerolog.New(&logs)
			r, err := Start(context.Background(), Config{Policies: cfg.Policies}, zerolog.Nop())
			if err != nil {
				t.Fatal(err)
			}
			Ready(log.Info(), cfg, r).Msg("serving")
			if !strings.Contains(logs.String(), tc.want) {
				t.Fatalf("ready line %s\nwant it to hold %s", logs.String(), tc.want)
			}
		})
	}
}

func TestStartErrors(t *testing.T) {
	bad := t.TempDir()
	os.WriteFile(filepath.Join(bad, "p.yaml"), []byte("kind: Nope\napiVersion: v1\n"), 0o644)
	for _, tc := range []struct {
		cfg    Config
		config bool
		msg    string
	}{
		{Config{Policies: "/nonexistent"}, false, "load /nonexistent: stat /nonexistent: no such file or directory"},
		{Config{Policies: bad}, false, "load " + bad + ": 1 error in policy bundle:"},
		{Config{Policies: "ftp://x"}, true, `configuration error: policy location "ftp://x": unsupported scheme "ftp"`},
		{Config{Policies: "../../../policies/examples", PublicKey: "-----BEGIN"}, true, "configuration error: ADMITFN_BUNDLE_PUBLIC_KEY: public key: text outside PEM blocks"},
		{Config{Policies: "../../../policies/examples", Fallback: bad}, true, "configuration error: fallback bundle " + bad + ": 1 error in policy bundle:"},
		{Config{Policies: "gs://b/p"}, true, "configuration error: gs://b/p: storage backend not built in: this function reads directories only"},
		// A key setting that holds no key does not turn verification off.
		{Config{Policies: "../../../policies/examples", PublicKeySet: true}, true, noKey},
		{Config{Policies: "../../../policies/examples", PublicKey: " \n\t"}, true, noKey},
		{Config{Policies: "../../../policies/examples", PublicKey: ",", PublicKeySet: true}, true, noKey},
	} {
		_, err := Start(context.Background(), tc.cfg, zerolog.Nop())
		if err == nil || errors.Is(err, ErrConfig) != tc.config || !strings.HasPrefix(err.Error(), tc.msg) {
			t.Errorf("%+v: %v (config error %v), want %q", tc.cfg, err, tc.config, tc.msg)
		}
	}
}

// OpenWith opens directories, its backends' schemes through them, and
// refuses the rest, naming what it reads.
func TestOpenWith(t *testing.T) {
	var opened []store.Location
	open := OpenWith(map[string]Opener{"s3": func(_ context.Context, loc store.Location) (store.Bucket, error) {
		opened = append(opened, loc)
		return store.NewDir(t.TempDir()), nil
	}})
	ctx := context.Background()
	dir := t.TempDir()
	if b, err := open(ctx, store.Location{Bucket: dir}); err != nil || b.Location() != dir {
		t.Fatalf("directory: %v %v", b, err)
	}
	if _, err := open(ctx, store.Location{Bucket: filepath.Join(dir, "missing")}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing directory: %v", err)
	}
	s3 := store.Location{Scheme: "s3", Bucket: "b", Prefix: "p"}
	if _, err := open(ctx, s3); err != nil || len(opened) != 1 || opened[0] != s3 {
		t.Errorf("s3: %v, opened %v", err, opened)
	}
	_, err := open(ctx, store.Location{Scheme: "gs", Bucket: "b", Prefix: "p"})
	if !errors.Is(err, store.ErrNotBuiltIn) || err.Error() != "gs://b/p: storage backend not built in: this function reads s3:// and directories" {
		t.Errorf("gs: %v", err)
	}
	two := OpenWith(map[string]Opener{"s3": nil, "gs": nil})
	if _, err := two(ctx, store.Location{Scheme: "az", Bucket: "b"}); err == nil || !strings.HasSuffix(err.Error(), "this function reads gs:// and s3:// and directories") {
		t.Errorf("two backends: %v", err)
	}
}
