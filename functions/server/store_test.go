package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/admitfn/admitfn/functions/bundle/store"
	"github.com/admitfn/admitfn/functions/bundle/store/gcsstore"
	"github.com/admitfn/admitfn/functions/bundle/store/s3store"
	"github.com/admitfn/admitfn/functions/bundle/store/storetest"
)

func readyz(t *testing.T, addr string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The server loads from an object store and picks up a newly published
// bundle by itself, in the background.
func TestBundleFromObjectStores(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T) (store.Bucket, string)
	}{
		{"s3", func(t *testing.T) (store.Bucket, string) {
			s := storetest.StartS3(t)
			s.CreateBucket(t, "policies", true)
			s.SetEnv(t)
			return s3store.New(s.Client(s.Endpoint), store.Location{Scheme: "s3", Bucket: "policies", Prefix: "prod"}), "s3://policies/prod"
		}},
		{"gcs", func(t *testing.T) (store.Bucket, string) {
			g := storetest.StartGCS(t)
			g.CreateBucket(t, "policies", false)
			t.Setenv("STORAGE_EMULATOR_HOST", g.Host)
			return gcsstore.New(g.Client(t, g.Host), store.Location{Scheme: "gs", Bucket: "policies", Prefix: "prod"}), "gs://policies/prod"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bucket, loc := tc.setup(t)
			first := storetest.PublishDir(t, bucket, examples).Bundle
			addr, logs := start(t, []string{"--addr", "127.0.0.1:0", "--policies", loc, "--refresh-interval", "1s"}, nil)
			code, body := readyz(t, addr)
			if code != 200 || !strings.HasPrefix(body, "ok: bundle "+first+" from "+loc+", age ") {
				t.Fatalf("readyz %d %q", code, body)
			}
			second := storetest.PublishDir(t, bucket, "../../policies/library/disallow-latest-tag").Bundle
			// Interval 1s plus up to 0.2s of jitter: the background check
			// comes round again and again until it is seen.
			deadline := time.Now().Add(patience)
			for {
				_, body = readyz(t, addr)
				if strings.HasPrefix(body, "ok: bundle "+second+" from "+loc) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("bundle %s not served after %v: %q\n%s", second, patience, body, logs)
				}
				time.Sleep(100 * time.Millisecond)
			}
			if !strings.Contains(logs.String(), `"previous_bundle":"`+first+`"`) {
				t.Errorf("no reload logged:\n%s", logs)
			}
		})
	}
}

// GET /metrics is Prometheus text with the review and bundle metrics.
func TestMetricsEndpoint(t *testing.T) {
	addr, _ := start(t, []string{"--addr", "127.0.0.1:0", "--policies", examples}, nil)
	if code, err := post(t, http.DefaultClient, "http://"+addr+"/validate?timeout=10s", review(t)); err != nil || code != 200 {
		t.Fatalf("review: %d %v", code, err)
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`admitfn_reviews_total{decision="denied",route="/validate",status="200"} 1`,
		`admitfn_review_duration_ms_count{decision="denied",route="/validate"} 1`,
		"admitfn_bundle_age_seconds ",
		"admitfn_bundle_load_errors_total 0",
		"admitfn_rejected_requests_total 0",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
