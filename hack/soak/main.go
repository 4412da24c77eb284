// Command soak is `make soak`: the server binary, built here, serves the
// example bundle on loopback while concurrent keep-alive clients send the
// golden reviews for a fixed time. It prints throughput, latency
// percentiles and the server's resident memory, and exits 1 on any error
// or when memory in the last window outgrows the first.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"time"

	"github.com/admitfn/admitfn/test/soak"
)

func main() {
	clients := flag.Int("clients", 4*runtime.NumCPU(), "concurrent keep-alive clients")
	duration := flag.Duration("duration", 60*time.Second, "how long the load runs")
	window := flag.Duration("window", 10*time.Second, "first and last spans whose memory is compared")
	policies := flag.String("policies", "policies/examples", "the bundle served (its golden reviews must apply)")
	testdata := flag.String("reviews", "adapters/httpadapter/testdata", "directory of reviews.json and the review bodies")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *clients, *duration, *window, *policies, *testdata); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, clients int, duration, window time.Duration, policies, testdata string) error {
	cases, err := soak.ExampleCases(testdata, policies)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "admitfn-soak-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "server")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./functions/server")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build the server: %w", err)
	}
	cfg := soak.Config{Server: bin, Policies: policies, Cases: cases, Clients: clients, Duration: duration, Window: window}
	fmt.Print(cfg.Title())
	rep, err := soak.Run(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Print(rep)
	if !rep.OK() {
		return fmt.Errorf("failed: %d errors, memory flat: %v", rep.Errors, rep.Flat())
	}
	return nil
}
