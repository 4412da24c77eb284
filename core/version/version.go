// Package version says which admitfn a binary is: its module version and
// VCS revision, as the Go toolchain recorded them in the build, the
// Kubernetes version whose admission semantics it embeds, and the Go
// version that built it.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Info describes a build.
type Info struct {
	// Version is the module version ("v0.1.0"), or "(devel)" for a build
	// from a checkout.
	Version string
	// Revision is the VCS revision, with "-dirty" when the tree had local
	// changes; empty when the build recorded none.
	Revision string
	// Kubernetes is the release whose k8s.io/apiserver policy packages
	// decide: "v1.37.2" for k8s.io/apiserver v0.37.2.
	Kubernetes string
	// CEL is the module version of github.com/google/cel-go.
	CEL string
	// Go is the toolchain that built the binary.
	Go string
}

// A release build stamps its version and revision here (make release:
// -ldflags -X), since it is built with -buildvcs=false to be reproducible
// and from a checkout, whose module version is always (devel).
var (
	release         string
	releaseRevision string
)

// Get reads the build's information.
func Get() Info {
	info := Info{Version: "(devel)", Go: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		info = fromBuild(bi, info)
	}
	return stamped(info, release, releaseRevision)
}

func stamped(info Info, version, revision string) Info {
	if version != "" {
		info.Version = version
	}
	if revision != "" {
		info.Revision = revision
	}
	return info
}

func fromBuild(bi *debug.BuildInfo, info Info) Info {
	if v := bi.Main.Version; v != "" {
		info.Version = v
	}
	var dirty bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && info.Revision != "" {
		info.Revision += "-dirty"
	}
	for _, d := range bi.Deps {
		path := d.Path
		if d.Replace != nil {
			d = d.Replace
		}
		switch path {
		case "k8s.io/apiserver":
			info.Kubernetes = kubernetes(d.Version)
		case "github.com/google/cel-go":
			info.CEL = d.Version
		}
	}
	return info
}

// kubernetes is the Kubernetes release of a staging module's version:
// k8s.io/apiserver v0.X.Y is published with Kubernetes v1.X.Y.
func kubernetes(module string) string {
	if rest, ok := strings.CutPrefix(module, "v0."); ok {
		return "v1." + rest
	}
	return module
}

// String is the one line `admitfn version` prints.
func (i Info) String() string {
	rev := i.Revision
	if rev == "" {
		rev = "unknown"
	}
	k8s := i.Kubernetes
	if k8s == "" {
		k8s = "unknown"
	}
	return fmt.Sprintf("admitfn %s (revision %s, Kubernetes %s, %s)", i.Version, rev, k8s, i.Go)
}
