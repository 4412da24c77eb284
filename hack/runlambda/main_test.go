package main

import (
	"context"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/admitfn/admitfn/test/testbin"
)

func TestMain(m *testing.M) { os.Exit(testbin.Run(m)) }

// make run-lambda's stand-ins answer the README's review through the real
// bootstrap, and stop it when done.
func TestServe(t *testing.T) {
	t.Setenv("ADMITFN_POLICIES", "../../policies/examples")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, ln, testbin.Path(t, "bootstrap"), 8*time.Second) }()
	review, err := os.ReadFile("../../policies/reviews/deployment-production.json")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post("http://"+ln.Addr().String()+"/validate?timeout=10s", "application/json", strings.NewReader(string(review)))
	if err != nil {
		t.Fatal(err)
	}
	var body strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		body.Write(buf[:n])
		if err != nil {
			break
		}
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(body.String(), `"allowed":false`) || !strings.Contains(body.String(), "at least 2 replicas are required in namespace production") {
		t.Errorf("%d %s", resp.StatusCode, body.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("serve: %v", err)
	}
}
