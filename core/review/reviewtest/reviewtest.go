// Package reviewtest reads AdmissionReview fixtures for tests.
package reviewtest

import (
	"os"
	"testing"

	"github.com/admitfn/admitfn/core/review"
)

// Read decodes the AdmissionReview in the file at path, failing t if it
// cannot be read or decoded.
func Read(t testing.TB, path string) *review.Request {
	t.Helper()
	body, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := review.Decode(body)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return r
}
