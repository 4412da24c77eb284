package version

import (
	"runtime/debug"
	"testing"
)

func TestFromBuild(t *testing.T) {
	bi := &debug.BuildInfo{
		Main: debug.Module{Path: "github.com/admitfn/admitfn", Version: "v0.1.0"},
		Deps: []*debug.Module{
			{Path: "k8s.io/api", Version: "v0.36.0"},
			{Path: "k8s.io/apiserver", Version: "v0.36.1", Replace: &debug.Module{Path: "k8s.io/apiserver", Version: "v0.37.2"}},
			{Path: "github.com/google/cel-go", Version: "v0.26.1"},
		},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123abc"}, {Key: "vcs.modified", Value: "true"}},
	}
	got := fromBuild(bi, Info{Version: "(devel)", Go: "go1.26.8"})
	want := Info{Version: "v0.1.0", Revision: "0123abc-dirty", Kubernetes: "v1.37.2", CEL: "v0.26.1", Go: "go1.26.8"}
	if got != want {
		t.Errorf("fromBuild = %+v, want %+v", got, want)
	}
	if s := want.String(); s != "admitfn v0.1.0 (revision 0123abc-dirty, Kubernetes v1.37.2, go1.26.8)" {
		t.Errorf("String() = %q", s)
	}
	if s := (Info{Version: "(devel)", Go: "go1.26.8"}).String(); s != "admitfn (devel) (revision unknown, Kubernetes unknown, go1.26.8)" {
		t.Errorf("String() of an unstamped build = %q", s)
	}
}

// A release's -X stamp wins over what the build recorded.
func TestStamped(t *testing.T) {
	built := Info{Version: "(devel)", Revision: "abc", Kubernetes: "v1.37.2", Go: "go1.26.8"}
	if got := stamped(built, "", ""); got != built {
		t.Errorf("unstamped: %+v", got)
	}
	want := Info{Version: "v0.1.0", Revision: "0123", Kubernetes: "v1.37.2", Go: "go1.26.8"}
	if got := stamped(built, "v0.1.0", "0123"); got != want {
		t.Errorf("stamped: %+v, want %+v", got, want)
	}
}
