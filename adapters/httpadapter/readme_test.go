package httpadapter

import (
	"bytes"
	"encoding/base64"
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
	"github.com/admitfn/admitfn/test/doccheck"
)

// The README's quick start sends a review with curl and shows the answer:
// each curl block, served by the example bundle, answers its JSON block.
func TestReadmeQuickStartAnswers(t *testing.T) {
	blocks := doccheck.Find(t, "README.md", 4) // curl, answer, curl, answer
	curl := regexp.MustCompile(`^curl -s -X POST 'http://127\.0\.0\.1:8080(/[a-z]+\?timeout=10s)' \\\n\s+-H 'Content-Type: application/json' \\\n\s+--data @(\S+)\n$`)
	var (
		curls   [][]string
		answers []string
	)
	for i := 0; i < len(blocks); i += 2 {
		c := curl.FindStringSubmatch(blocks[i].Text)
		if c == nil || blocks[i+1].Lang != "json" {
			t.Fatalf("%s: not a curl of the local server followed by its JSON answer", blocks[i])
		}
		curls, answers = append(curls, c), append(answers, blocks[i+1].Text)
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
		if err := json.Unmarshal([]byte(answers[i]), &want); err != nil {
			t.Fatalf("README's answer to %s: %v", c[1], err)
		}
		if rec.Code != http.StatusOK || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: HTTP %d\n%s\nREADME shows:\n%s", c[1], rec.Code, rec.Body, answers[i])
		}
	}
}

// The README decodes the mutating answer's patch in its prose.
func TestReadmeDecodedPatch(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	decoded := regexp.MustCompile("(?s)Decoded, the patch adds .*?:\n`(\\[.*?\\])`").FindSubmatch(readme)
	answer := regexp.MustCompile(`"patch": "([A-Za-z0-9+/=]+)"`).FindSubmatch(readme)
	if decoded == nil || answer == nil {
		t.Fatal("README: no patch and its decoding")
	}
	patch, err := base64.StdEncoding.DecodeString(string(answer[1]))
	if err != nil || string(patch) != string(decoded[1]) {
		t.Errorf("README's patch decodes to %s (%v), the README says %s", patch, err, decoded[1])
	}
}
