// Command lambdazip writes the Lambda deployment packages of `make lambda`:
// one zip per architecture, each holding a static, reproducible bootstrap.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/admitfn/admitfn/hack/build/lambdabuild"
)

func main() {
	dir := flag.String("dir", "dist/lambda", "output directory")
	flag.Parse()
	archs := flag.Args()
	if len(archs) == 0 {
		archs = []string{"arm64", "amd64"}
	}
	for _, arch := range archs {
		out := filepath.Join(*dir, "admitfn-"+arch+".zip")
		size, err := lambdabuild.BuildZip(context.Background(), lambdabuild.Package, arch, out)
		if err != nil {
			fmt.Fprintln(os.Stderr, "lambdazip:", err)
			os.Exit(1)
		}
		fi, err := os.Stat(out)
		if err != nil {
			fmt.Fprintln(os.Stderr, "lambdazip:", err)
			os.Exit(1)
		}
		fmt.Printf("%s: bootstrap %.1f MiB, zip %.1f MiB\n", out, float64(size)/(1<<20), float64(fi.Size())/(1<<20))
	}
}
