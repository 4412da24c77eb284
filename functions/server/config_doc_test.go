package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/admitfn/admitfn/test/doccheck"
)

var update = flag.Bool("update", false, "rewrite docs/configuration.md's flag reference")

// docs/configuration.md holds the server's -h text, every flag with its
// environment variable and default, so the page cannot miss one.
func TestConfigurationDocIsTheHelp(t *testing.T) {
	const path = "../../docs/configuration.md"
	doccheck.Find(t, "docs/configuration.md", 1)
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var help bytes.Buffer
	if _, err := parseConfig([]string{"-h"}, func(string) string { return "" }, &help); !errors.Is(err, pflag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	text := string(doc)
	const open = "it):\n\n<!-- checked by TestConfigurationDocIsTheHelp -->\n```text\n"
	start := strings.Index(text, open)
	if start < 0 {
		t.Fatalf("%s: no text block for the server's -h", path)
	}
	start += len(open)
	end := strings.Index(text[start:], "```\n")
	if got := text[start : start+end]; got != help.String() {
		if *update {
			if err := os.WriteFile(path, []byte(text[:start]+help.String()+text[start+end:]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("%s: the flag reference is not the server's -h (go test ./functions/server -update rewrites it):\n%s\nwant:\n%s", path, got, help.String())
	}
}

// docs/policies.md's bundle that does not load: the server run on it
// prints what the page shows, but for the time.
func TestPoliciesDocLoadError(t *testing.T) {
	blocks := doccheck.Find(t, "docs/policies.md", 2) // the bundle, the server's output
	command, output, ok := strings.Cut(blocks[1].Text, "\n")
	if blocks[0].Lang != "yaml" || !ok || command != "$ go run ./functions/server --policies ./my-policies" {
		t.Fatalf("%s, %s: not a bundle and the server's output on it", blocks[0], blocks[1])
	}
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "my-policies"), 0o755)
	if err := os.WriteFile(filepath.Join(dir, "my-policies", "p.yaml"), []byte(blocks[0].Text), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(serverBinary(t), "--policies", "./my-policies")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("exit: %v\n%s", err, out)
	}
	stamp := regexp.MustCompile(`"time":"[^"]+"`)
	if got, want := stamp.ReplaceAllString(string(out), `"time":"T"`), stamp.ReplaceAllString(output, `"time":"T"`); got != want {
		t.Errorf("the server printed:\n%s\ndocs/policies.md shows:\n%s", got, want)
	}
}
