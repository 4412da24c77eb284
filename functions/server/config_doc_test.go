package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/configuration.md's flag reference")

// docs/configuration.md holds the server's -h text, every flag with its
// environment variable and default, so the page cannot miss one.
func TestConfigurationDocIsTheHelp(t *testing.T) {
	const path = "../../docs/configuration.md"
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var help bytes.Buffer
	if _, err := parseConfig([]string{"-h"}, func(string) string { return "" }, &help); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	text := string(doc)
	const open = "it):\n\n```text\n"
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
