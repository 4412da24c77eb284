package doccheck

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Flags named in prose: inline code spans and table cells of the documents,
// and the descriptions of the Terraform variables. The CLI's flags and the
// server's take two dashes (`--ca-bundle`, `--tls-cert`); a single-dash
// long flag is one both refuse.

var (
	cliFlag    = regexp.MustCompile(`--([a-z][a-z0-9-]+)`)
	serverFlag = regexp.MustCompile(`(?m)^\s+(?:-[a-z], )?--([a-z][a-z0-9-]+)`)
	codeSpan   = regexp.MustCompile("`([^`\n]+)`")
	tfDesc     = regexp.MustCompile(`description\s*=\s*"((?:[^"\\]|\\.)*)"`)
	singleDash = regexp.MustCompile(`(?:^|[\s(/,'"])-([a-z][a-z0-9-]+)`)
)

// flagSets are the CLI's long flags (docs/cli.md, every command's help,
// checked by TestCLIReferenceIsTheHelp) and the server's
// (docs/configuration.md, its -h, checked by TestConfigurationDocIsTheHelp).
func flagSets(t *testing.T, root string) (cli, server map[string]bool) {
	t.Helper()
	read := func(name string) string {
		data, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	cli, server = map[string]bool{}, map[string]bool{}
	for _, m := range cliFlag.FindAllStringSubmatch(read("docs/cli.md"), -1) {
		cli[m[1]] = true
	}
	for _, m := range serverFlag.FindAllStringSubmatch(read("docs/configuration.md"), -1) {
		server[m[1]] = true
	}
	if len(cli) < 30 || len(server) < 15 {
		t.Fatalf("%d CLI flags, %d server flags: the references no longer show them", len(cli), len(server))
	}
	return cli, server
}

// proseDrift returns, for text (a Markdown document, or with tf a
// Terraform file), each single-dash long flag in its prose that is the
// CLI's or the server's.
func proseDrift(file, text string, tf bool, cli, server map[string]bool) []string {
	var out []string
	check := func(line int, span string) {
		if strings.HasPrefix(span, "go ") && !strings.Contains(span, "./functions/server") {
			return // the go command's flags
		}
		for _, m := range singleDash.FindAllStringSubmatch(span, -1) {
			if name := m[1]; cli[name] || server[name] {
				out = append(out, fmt.Sprintf("%s:%d: %q names -%s, which admitfn spells --%s", file, line, span, name, name))
			}
		}
	}
	fenced := false
	for i, line := range strings.Split(text, "\n") {
		if !tf && strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		if tf {
			for _, m := range tfDesc.FindAllStringSubmatch(line, -1) {
				check(i+1, m[1])
			}
			continue
		}
		for _, m := range codeSpan.FindAllStringSubmatch(line, -1) {
			check(i+1, m[1])
		}
		if strings.HasPrefix(strings.TrimSpace(line), "|") {
			for _, cell := range strings.Split(codeSpan.ReplaceAllString(line, ""), "|") {
				check(i+1, strings.TrimSpace(cell))
			}
		}
	}
	return out
}

// The documents' prose, tables and the Terraform variables name the CLI's
// flags as it takes them.
func TestDocFlagsInProse(t *testing.T) {
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	cli, server := flagSets(t, root)
	files, err := Files(root)
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(filepath.Join(root, "terraform"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(path, ".tf") || d.Name() == "README.md") {
			rel, _ := filepath.Rel(root, path)
			files = append(files, rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range proseDrift(f, string(data), strings.HasSuffix(f, ".tf"), cli, server) {
			t.Error(d)
		}
		checked++
	}
	if checked < 30 {
		t.Errorf("%d files: the walk no longer sees the documents", checked)
	}
}

// The check finds a planted drift in each place it reads.
func TestDocFlagsInProseCatchesDrift(t *testing.T) {
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	cli, server := flagSets(t, root)
	for _, tc := range []struct {
		text string
		tf   bool
		want string
	}{
		{"render flags: `-ca-bundle FILE` and more\n", false, `t:1: "-ca-bundle FILE" names -ca-bundle, which admitfn spells --ca-bundle`},
		{"| flag | meaning |\n|---|---|\n| -include-kube-system | kube-system too |\n", false, `t:3: "-include-kube-system" names -include-kube-system, which admitfn spells --include-kube-system`},
		{"the server's `--policies`, and `admitfn test -policies x`\n", false, `t:1: "admitfn test -policies x" names -policies, which admitfn spells --policies`},
		{"serve with `-tls-cert FILE`\n", false, `t:1: "-tls-cert FILE" names -tls-cert, which admitfn spells --tls-cert`},
		{"or `go run ./functions/server -addr :8443`\n", false, `t:1: "go run ./functions/server -addr :8443" names -addr, which admitfn spells --addr`},
		{`variable "x" {` + "\n" + `  description = "Seconds (the webhook's -timeout)."` + "\n}\n", true, `t:2: "Seconds (the webhook's -timeout)." names -timeout, which admitfn spells --timeout`},
	} {
		got := proseDrift("t", tc.text, tc.tf, cli, server)
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("%q: %q, want [%q]", tc.text, got, tc.want)
		}
	}
	// The go command's flags, and code blocks (which doccheck runs), are
	// not admitfn's.
	if got := proseDrift("t", "run `go test -timeout 30m`\n```sh\nadmitfn render -name x\n```\n", false, cli, server); len(got) != 0 {
		t.Errorf("false positives: %q", got)
	}
}
