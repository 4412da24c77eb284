package awslambda

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzInvoke: any payload is an HTTP response of its trigger's format or
// an EventError; never a panic.
func FuzzInvoke(f *testing.F) {
	h := examplesHandler(f, io.Discard)
	events, _ := filepath.Glob("testdata/*.event.json")
	for _, name := range events {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"Records":[]}`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		var out []byte
		var err error
		done := make(chan struct{})
		go func() {
			defer close(done)
			out, err = h.Invoke(context.Background(), payload)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("no answer after 5s")
		}
		if err != nil {
			var ee *EventError
			if out != nil || !errors.As(err, &ee) {
				t.Fatalf("error %v with output %q", err, out)
			}
			return
		}
		var resp struct {
			StatusCode int `json:"statusCode"`
		}
		if err := json.Unmarshal(out, &resp); err != nil || resp.StatusCode < 200 || resp.StatusCode > 599 {
			t.Fatalf("response %s: %v", out, err)
		}
	})
}
