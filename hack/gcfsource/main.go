// Command gcfsource writes the Cloud Functions source zip of `make gcf`.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/admitfn/admitfn/hack/build/gcfsource"
)

func main() {
	out := flag.String("o", "dist/gcf/admitfn-source.zip", "output zip")
	policies := flag.String("policies", "policies/examples", "bundle directory to ship in policies/")
	flag.Parse()
	repo, err := os.Getwd()
	if err == nil {
		var buf bytes.Buffer
		if err = gcfsource.Write(context.Background(), repo, *policies, &buf); err == nil {
			if err = os.MkdirAll(filepath.Dir(*out), 0o755); err == nil {
				err = os.WriteFile(*out, buf.Bytes(), 0o644)
			}
			fmt.Printf("%s: %.1f MiB\n", *out, float64(buf.Len())/(1<<20))
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gcfsource:", err)
		os.Exit(1)
	}
}
