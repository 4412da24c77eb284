// Package versionflag answers the runner's --version before the function
// starts. The gcf package builds its engine in init, and exits there when
// the bundle does not load, so the runner's main would come too late. Go
// initialises, among the packages whose imports are done, the first by
// import path (the spec, since Go 1.21): this package imports only the
// standard library and core/version, which are done long before the
// function's k8s.io dependencies, so its init runs before gcf's.
package versionflag

import (
	"fmt"
	"os"

	"github.com/admitfn/admitfn/core/version"
)

func init() {
	for _, arg := range os.Args[1:] {
		if arg == "--version" || arg == "-version" {
			fmt.Println(version.Get())
			os.Exit(0)
		}
	}
}
