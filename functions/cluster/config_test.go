package cluster

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/admitfn/admitfn/test/doccheck"
)

func TestParseConfig(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "clusters.yaml")
	if err := os.WriteFile(file, []byte("clusters:\n- name: prod\n  server: https://10.0.0.1\n  tokenFile: /var/run/token\n  namespaceTTL: 5s\n- name: dev\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "fleet"), []byte(`{"clusters":[{"name":"eu"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	for _, tc := range []struct {
		in    string
		names []string
		err   string
	}{
		{in: "", names: nil},
		{in: "prod, dev", names: []string{"prod", "dev"}},
		{in: file, names: []string{"prod", "dev"}},
		{in: `{"clusters":[{"name":"eu","server":"https://x","eks":{"clusterName":"eu-1"}}]}`, names: []string{"eu"}},
		{in: "prod,Prod", err: `clusters[1]: name "Prod": want a DNS label (a-z, 0-9 and -, at most 63)`},
		{in: "prod,prod", err: `cluster "prod": named twice`},
		{in: "a/b", err: `clusters: "a/b" is read as a file (it has a slash): open a/b: no such file or directory`},
		// Finding: a file named without ./ was read as a cluster name.
		{in: "clusters.yaml", names: []string{"prod", "dev"}},
		{in: "fleet", names: []string{"eu"}},
		{in: "missing.yaml", err: `clusters: "missing.yaml" is read as a file (it ends in .yaml): open missing.yaml: no such file or directory`},
		{in: "missing", names: []string{"missing"}},
		{in: `{"clusters":[{"name":"eu","tokenFile":"/t"}]}`, err: `cluster "eu": server is required with tokenFile, eks or gke`},
		{in: `{"clusters":[{"name":"eu","server":"https://x","tokenFile":"/t","gke":{}}]}`, err: `cluster "eu": set one of kubeconfig, tokenFile, eks and gke`},
		{in: `{"clusters":[{"name":"eu","server":"https://x","eks":{}}]}`, err: `cluster "eu": eks.clusterName is required`},
		{in: `{"clusters":[{"name":"eu","namespaceTTL":"-1s"}]}`, err: `cluster "eu": durations cannot be negative`},
		{in: `{"clusters":[{"name":"eu","token":"s3cr3t"}]}`, err: `clusters: error unmarshaling JSON: while decoding JSON: json: unknown field "token"`},
	} {
		c, err := ParseConfig(tc.in, os.ReadFile)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.err || (err == nil && !reflect.DeepEqual(c.Names(), tc.names)) {
			t.Errorf("%q: names %v, err %q\nwant %v, %q", tc.in, c.Names(), got, tc.names, tc.err)
		}
		if strings.Contains(got, "s3cr3t") {
			t.Errorf("%q: the error quotes a value: %s", tc.in, got)
		}
	}
}

// docs/cluster.md's example configuration is one the function accepts.
func TestClusterConfigDoc(t *testing.T) {
	block := doccheck.Find(t, "docs/cluster.md", 1)[0]
	c, err := ParseConfig(block.Text, os.ReadFile)
	if err != nil {
		t.Fatalf("%s: %v", block, err)
	}
	if got, want := c.Names(), []string{"prod-eu", "eks-prod", "gke-prod", "dev", "edge"}; !reflect.DeepEqual(got, want) {
		t.Errorf("names %v, want %v", got, want)
	}
	defaults := Cluster{}.withDefaults()
	first := c.Clusters[0]
	if first.NamespaceTTL != defaults.NamespaceTTL || first.ParamTTL != defaults.ParamTTL || first.AuthorizerTTL != defaults.AuthorizerTTL ||
		first.CacheEntries != defaults.CacheEntries || first.MaxInFlight != defaults.MaxInFlight || first.ReadTimeout != defaults.ReadTimeout {
		t.Errorf("%s: the settings shown as the defaults are not: %+v, defaults %+v", block, first, defaults)
	}
	if c.Clusters[4].HasAccess() || !c.Clusters[3].HasAccess() {
		t.Errorf("access: %+v", c.Clusters)
	}
}
