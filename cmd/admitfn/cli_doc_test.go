package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/admitfn/admitfn/test/doccheck"
)

// docs/cli.md is the reference of every command: each section's block is
// the command's own --help text. go test ./cmd/admitfn -update rewrites them.
func TestCLIReferenceIsTheHelp(t *testing.T) {
	const path = "../../docs/cli.md"
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	commands := []string{"", "init", "render", "test", "lint", "apply", "push", "diff", "keygen", "token", "version", "completion"}
	doccheck.Find(t, "docs/cli.md", len(commands))
	const open = "\n\n<!-- checked by TestCLIReferenceIsTheHelp -->\n```text\n"
	for _, cmd := range commands {
		title, args := "## admitfn", []string{"--help"}
		if cmd != "" {
			title, args = title+" "+cmd, []string{cmd, "--help"}
		}
		var out bytes.Buffer
		if code := run(args, &out, &out); code != 0 {
			t.Fatalf("admitfn %s: exit %d\n%s", strings.Join(args, " "), code, out.String())
		}
		start := strings.Index(text, "\n"+title+open)
		if start < 0 {
			t.Errorf("%s: no section %q with a text block", path, title)
			continue
		}
		start += len("\n" + title + open)
		end := strings.Index(text[start:], "```\n")
		if end < 0 {
			t.Fatalf("%s: the block of %q does not end", path, title)
		}
		if got := text[start : start+end]; got != out.String() {
			if *update {
				text = text[:start] + out.String() + text[start+end:]
				continue
			}
			t.Errorf("%s, %q: the block is not `admitfn %s`'s help (go test ./cmd/admitfn -update rewrites it):\n%s\nwant:\n%s", path, title, strings.Join(args, " "), got, out.String())
		}
	}
	if *update {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
