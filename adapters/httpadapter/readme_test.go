package httpadapter

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"regexp"
	"testing"

	"github.com/rs/zerolog"

	"github.com/admitfn/admitfn/core/celeval"
	"github.com/admitfn/admitfn/core/engine"
)

// The README's quick start sends a review with curl and shows the answer:
// each curl block, served by the example bundle, answers its JSON block.
func TestReadmeQuickStartAnswers(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	curls := regexp.MustCompile(`curl -s -X POST 'http://127\.0\.0\.1:8080(/[a-z]+\?timeout=10s)' \\\n\s+-H 'Content-Type: application/json' \\\n\s+--data @(\S+)\n`).FindAllStringSubmatch(string(readme), -1)
	answers := regexp.MustCompile("(?s)```json\n(.*?)```").FindAllStringSubmatch(string(readme), -1)
	if len(curls) != 2 || len(answers) != len(curls) {
		t.Fatalf("README: %d curl commands and %d JSON answers, want 2 of each", len(curls), len(answers))
	}
	eng, _, err := engine.Load(os.DirFS("../../policies/examples"), ".", celeval.NewCompiler())
	if err != nil {
		t.Fatal(err)
	}
	h := New(eng, zerolog.Nop())
	for i, c := range curls {
		body, err := os.ReadFile("../../" + c[2])
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodPost, c[1], bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var got, want any
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatalf("%s: %v", c[1], err)
		}
		if err := json.Unmarshal([]byte(answers[i][1]), &want); err != nil {
			t.Fatalf("README's answer to %s: %v", c[1], err)
		}
		if rec.Code != http.StatusOK || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: HTTP %d\n%s\nREADME shows:\n%s", c[1], rec.Code, rec.Body, answers[i][1])
		}
	}
}
