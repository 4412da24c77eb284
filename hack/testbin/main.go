// Command testbin builds every binary the tests run into one directory, so
// `make test` builds each once; the tests find them through ADMITFN_TEST_BIN.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/admitfn/admitfn/test/testbin"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: testbin DIR")
		os.Exit(2)
	}
	for _, name := range testbin.Names() {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), testbin.Timeout)
		err := testbin.Build(ctx, name, os.Args[1])
		cancel()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Printf("testbin: %s built in %s\n", name, time.Since(start).Round(time.Second))
	}
}
