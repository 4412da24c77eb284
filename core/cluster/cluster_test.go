package cluster_test

import (
	"context"
	"strings"
	"testing"

	"github.com/admitfn/admitfn/core/cluster"
	"github.com/admitfn/admitfn/core/cluster/clustertest"
)

func TestValidName(t *testing.T) {
	for name, want := range map[string]bool{
		"prod": true, "prod-eu-1": true, "a": true, strings.Repeat("a", 63): true,
		"": false, "Prod": false, "-prod": false, "prod-": false, "prod/eu": false, "prod.eu": false, strings.Repeat("a", 64): false,
	} {
		if got := cluster.ValidName(name); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestContextCarriesTheCluster(t *testing.T) {
	if cluster.FromContext(context.Background()) != nil {
		t.Error("a context without a cluster has one")
	}
	c := &clustertest.Cluster{Static: cluster.Static{ClusterName: "prod"}}
	got := cluster.FromContext(cluster.NewContext(context.Background(), c))
	if got != cluster.Reader(c) || got.Name() != "prod" {
		t.Errorf("got %v, want the cluster put in", got)
	}
}
