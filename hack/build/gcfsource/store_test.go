package gcfsource

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/admitfn/admitfn/functions/bundle/store"
	"github.com/admitfn/admitfn/functions/bundle/store/gcsstore"
	"github.com/admitfn/admitfn/functions/bundle/store/storetest"
)

// The function built from the source zip reads its bundle from GCS (here
// fake-gcs-server, through STORAGE_EMULATOR_HOST, as the client library
// reads it) and reviews with it.
func TestBundleFromGCS(t *testing.T) {
	g := storetest.StartGCS(t)
	g.CreateBucket(t, "policies", false)
	m := storetest.PublishDir(t, gcsstore.New(g.Client(t, g.Host), store.Location{Scheme: "gs", Bucket: "policies", Prefix: "prod"}), filepath.Join(repoDir, "policies/examples"))
	base, logs := serve(t, srcDir, "STORAGE_EMULATOR_HOST="+g.Host, "ADMITFN_POLICIES=gs://policies/prod")

	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(string(body), "ok: bundle "+m.Bundle+" from gs://policies/prod, age ") {
		t.Fatalf("readyz %d %q\n%s", resp.StatusCode, body, logs)
	}
	req, err := os.ReadFile(filepath.Join(repoDir, "adapters/httpadapter/testdata/basic-deny.request.json"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(repoDir, "adapters/httpadapter/testdata/basic-deny.response.json"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err = http.Post(base+"/validate/dd1dcf98e3?timeout=10s", "application/json", strings.NewReader(string(req)))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !jsonEqual(t, got, want) {
		t.Errorf("review: %d %s\nwant %s", resp.StatusCode, got, want)
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		return false
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}
