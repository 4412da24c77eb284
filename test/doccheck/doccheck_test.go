package doccheck

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"

	"github.com/admitfn/admitfn/test/testbin"
)

func TestMain(m *testing.M) { os.Exit(testbin.Run(m)) }

// Every example in the documentation is checked: a block other than a
// shell one (which TestDocCommands runs through) names in its marker the
// tests that check it, each test exists and reads the block's document.
func TestEveryExampleIsChecked(t *testing.T) {
	root, blocks := documents(t)
	tests, err := testFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	marked := 0
	for _, b := range blocks {
		if b.Record {
			if b.File != "docs/performance.md" && b.File != "docs/performance-log.md" {
				t.Errorf("%s: only docs/performance.md and its log keep records of measurements", b)
			}
			continue
		}
		if len(b.Checks) == 0 {
			if b.Lang != "sh" {
				t.Errorf("%s: a %q block with no <!-- checked by TestName --> before it: make a test produce or check it", b, b.Lang)
			}
			continue
		}
		marked++
		for _, name := range b.Checks {
			src, ok := tests[name]
			if !ok {
				t.Errorf("%s: checked by %s, which no _test.go file defines", b, name)
				continue
			}
			if !strings.Contains(src, `Find(t, "`+b.File+`"`) {
				t.Errorf("%s: %s's file does not read %q with doccheck.Find", b, name, b.File)
			}
		}
	}
	if len(blocks) < 50 || marked < 25 {
		t.Errorf("%d blocks, %d marked: the parser no longer sees the documents", len(blocks), marked)
	}
}

// documents is the repository's root and every block of its documents.
func documents(t *testing.T) (string, []Block) {
	t.Helper()
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := All(root)
	if err != nil {
		t.Fatal(err)
	}
	return root, blocks
}

func makefile(t *testing.T, root string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// testFiles maps each Test function of the repository to its file's text.
func testFiles(root string) (map[string]string, error) {
	decl := regexp.MustCompile(`(?m)^func (Test\w+)\(t \*testing\.T\)`)
	tests := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "dist" || d.Name() == "node_modules" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllStringSubmatch(string(src), -1) {
			tests[m[1]] = string(src)
		}
		return nil
	})
	return tests, err
}

func TestParseFindsMarkedBlocks(t *testing.T) {
	doc := "# t\n\n<!-- checked by TestA, TestB -->\n```json\n{}\n```\n\n1. step\n\n   ```sh\n   make run\n     indented\n   ```\n<!-- a record of one measurement -->\n```\nP1 2\n```\n"
	blocks, err := Parse("d.md", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := []Block{
		{File: "d.md", Line: 4, Lang: "json", Checks: []string{"TestA", "TestB"}, Text: "{}\n"},
		{File: "d.md", Line: 10, Lang: "sh", Text: "make run\n  indented\n"},
		{File: "d.md", Line: 15, Record: true, Text: "P1 2\n"},
	}
	if len(blocks) != len(want) {
		t.Fatalf("got %+v", blocks)
	}
	for i := range want {
		if fmt.Sprint(blocks[i]) != fmt.Sprint(want[i]) || blocks[i].Lang != want[i].Lang || !slices.Equal(blocks[i].Checks, want[i].Checks) || blocks[i].Text != want[i].Text || blocks[i].Record != want[i].Record {
			t.Errorf("block %d: got %+v, want %+v", i, blocks[i], want[i])
		}
	}
	if _, err := Parse("d.md", []byte("```sh\nmake\n")); err == nil || err.Error() != "d.md: the block opened on line 1 is not closed" {
		t.Errorf("unclosed block: %v", err)
	}
}

func TestShape(t *testing.T) {
	got := Shape("soak: 8 clients for 1m0s (10 reviews), go1.26.8: p50 1.08ms, 98.2 MiB (5355/s)")
	if want := "soak: N clients for N (N reviews), goN: pN N, N MiB (N/s)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// Every command in the documentation's shell blocks is one that works:
// make targets and variables the Makefile has, packages that exist,
// admitfn commands and flags the CLI accepts, server flags the server
// accepts, Terraform variables the directory declares, local curl requests
// to routes the server serves. Other tools' commands are named in external.
func TestDocCommands(t *testing.T) {
	root, blocks := documents(t)
	c := &commands{root: root, t: t, makefile: string(makefile(t, root))}
	checked := 0
	for _, b := range blocks {
		if b.Lang != "sh" {
			continue
		}
		for _, err := range c.check(b) {
			t.Errorf("%s: %v", b, err)
		}
		checked++
	}
	if checked < 25 {
		t.Errorf("%d shell blocks: the parser no longer sees the documents", checked)
	}
}

// The checker refuses what the documentation must not say.
func TestDocCommandsCatchMistakes(t *testing.T) {
	root, _ := documents(t)
	c := &commands{root: root, t: t, makefile: string(makefile(t, root))}
	for _, tc := range []struct{ script, want string }{
		{"make rnu", `make: no target "rnu" in the Makefile`},
		{"make gcf POLICYS=x", `make: the Makefile reads no variable POLICYS`},
		{"go run ./cmd/admitfnn test x", `go run: no package ./cmd/admitfnn`},
		{"cd terraform/examples/aws-eks\ngo run ../../cmd/admitfn test x", `go run: no package ./terraform/cmd/admitfn`},
		{"admitfn rendr", `admitfn rendr: exit status 2: admitfn: unknown command "rendr"; did you mean "render"?`},
		{"admitfn completion bsh", `admitfn completion bsh: no such command (--help shows "admitfn completion")`},
		{"admitfn render -p x --ulr https://x", `admitfn render -p x --ulr https://x: exit status 2: admitfn render: unknown flag: --ulr`},
		{"go run ./functions/server --adr :8443", `server --adr :8443: exit status 2: admitfn server: unknown flag: --adr`},
		{"go run ./functions/server -addr :8443", `server -addr :8443: exit status 2: admitfn server: -addr: long flags take two dashes: --addr`},
		{"go run ./functions/server --max-connections many", `server --max-connections many: exit status 2: admitfn server: invalid argument "many" for "--max-connections" flag`},
		{"go run ./functions/server policies/examples", `server policies/examples: exit status 2: admitfn server: unexpected arguments`},
		{"cd terraform/examples/aws-eks\nterraform apply -var regoin=x", `terraform: terraform/examples/aws-eks declares no variable "regoin"`},
		{"curl -s http://127.0.0.1:8080/valdate", `curl: the server serves no route /valdate`},
		{"curl --data @policies/reviews/nope.json http://127.0.0.1:8080/validate", `curl: no file policies/reviews/nope.json`},
		{"go test ./core/engine -update", `go test: ./core/engine has no -update flag`},
		{"rm -rf /", `no check for the command "rm": add one to TestDocCommands or name it in external`},
	} {
		errs := c.check(Block{File: "t.md", Line: 1, Lang: "sh", Text: tc.script + "\n"})
		if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), tc.want) {
			t.Errorf("%q: got %v, want one error starting %q", tc.script, errs, tc.want)
		}
	}
}

// external are the other tools whose commands the documentation shows:
// their flags are theirs to check. TestInstallDocs runs the ones of
// docs/install.md.
var external = map[string]bool{
	"aws": true, "gcloud": true, "helm": true, "kustomize": true, "kubectl": true,
	"sha256sum": true, "openssl": true, "base64": true, "printf": true, "tar": true, "skopeo": true, "sudo": true,
	"install": true, "mkdir": true, "cp": true, "zip": true, "cat": true, "mktemp": true,
	"benchstat": true, "sleep": true, "tail": true, "grep": true,
	// The emulators of docs/bundles.md, which TestLocalStoresDoc runs.
	"versitygw": true, "fake-gcs-server": true,
}

type commands struct {
	root, makefile string
	t              *testing.T
	admitfn        string
	server         string
}

// check parses a block as the shell would and checks each simple command.
func (c *commands) check(b Block) []error {
	file, err := syntax.NewParser().Parse(strings.NewReader(b.Text), b.File)
	if err != nil {
		return []error{err}
	}
	var errs []error
	dir := "."
	cfg := &expand.Config{
		Env: placeholders{},
		CmdSubst: func(w io.Writer, _ *syntax.CmdSubst) error {
			_, err := io.WriteString(w, "CMD-OUTPUT")
			return err
		},
	}
	syntax.Walk(file, func(node syntax.Node) bool {
		call, ok := node.(*syntax.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		args, err := expand.Fields(cfg, call.Args...)
		if err != nil {
			errs = append(errs, err)
			return true
		}
		if args[0] == "cd" && len(args) == 2 {
			dir = args[1]
			return true
		}
		if err := c.command(dir, args); err != nil {
			errs = append(errs, err)
		}
		return true
	})
	return errs
}

// placeholders expands $NAME to itself: the documents' variables are the
// reader's.
type placeholders struct{}

func (placeholders) Get(name string) expand.Variable {
	if name == "IFS" {
		return expand.Variable{} // the default
	}
	return expand.Variable{Set: true, Kind: expand.String, Str: "$" + name}
}
func (placeholders) Each(func(string, expand.Variable) bool) {}

func (c *commands) command(dir string, args []string) error {
	name := filepath.Base(args[0])
	switch {
	case name == "make":
		return c.make(args[1:])
	case name == "go":
		return c.goCommand(dir, args[1:])
	case name == "admitfn":
		return c.admitfnArgs(args[1:])
	case name == "terraform":
		return c.terraform(dir, args[1:])
	case name == "curl":
		return c.curl(args[1:])
	}
	if external[name] {
		return nil
	}
	return fmt.Errorf("no check for the command %q: add one to TestDocCommands or name it in external", name)
}

func (c *commands) make(args []string) error {
	for _, a := range args {
		a = strings.Trim(a, "[]") // [VAR=value]: optional
		if v, _, ok := strings.Cut(a, "="); ok {
			if !strings.Contains(c.makefile, "$("+v+")") {
				return fmt.Errorf("make: the Makefile reads no variable %s", v)
			}
			continue
		}
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(a) + `:`).MatchString(c.makefile) {
			return fmt.Errorf("make: no target %q in the Makefile", a)
		}
	}
	return nil
}

func (c *commands) goCommand(dir string, args []string) error {
	if len(args) == 0 {
		return errors.New("go: no subcommand")
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "run":
		for i, a := range rest {
			if !strings.HasPrefix(a, "./") && !strings.HasPrefix(a, "../") {
				continue
			}
			// A package path is relative to the directory the block cd'd
			// to: name it from the repository's root.
			a = "./" + filepath.ToSlash(filepath.Join(dir, a))
			if err := c.pkg("go run", a); err != nil {
				return err
			}
			switch a {
			case "./cmd/admitfn":
				return c.admitfnArgs(rest[i+1:])
			case "./functions/server":
				return c.serverArgs(rest[i+1:])
			}
			return fmt.Errorf("go run %s: no check for its arguments", a)
		}
		return errors.New("go run: no package")
	case "install":
		for _, a := range rest {
			if p, ok := strings.CutPrefix(a, "github.com/admitfn/admitfn/"); ok {
				p, _, _ = strings.Cut(p, "@")
				return c.pkg("go install", "./"+p)
			}
		}
		return nil
	case "test":
		var pkgs []string
		for _, a := range rest {
			if strings.HasPrefix(a, "./") {
				if err := c.pkg("go test", a); err != nil {
					return err
				}
				pkgs = append(pkgs, a)
			}
		}
		for _, a := range rest {
			if a == "-update" {
				for _, p := range pkgs {
					if err := c.hasUpdateFlag(p); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}
	return fmt.Errorf("go %s: no check for it", sub)
}

func (c *commands) pkg(what, p string) error {
	matches, _ := filepath.Glob(filepath.Join(c.root, strings.TrimSuffix(p, "/..."), "*.go"))
	if len(matches) == 0 {
		return fmt.Errorf("%s: no package %s", what, p)
	}
	return nil
}

func (c *commands) hasUpdateFlag(p string) error {
	files, _ := filepath.Glob(filepath.Join(c.root, p, "*_test.go"))
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if strings.Contains(string(src), `flag.Bool("update"`) {
			return nil
		}
	}
	return fmt.Errorf("go test: %s has no -update flag", p)
}

// admitfnArgs runs the CLI with the arguments and --help: cobra parses
// every flag before it prints help, and runs nothing. The help's usage line
// names the command found, which must be the one the arguments name.
func (c *commands) admitfnArgs(args []string) error {
	if c.admitfn == "" {
		c.admitfn = testbin.Path(c.t, "admitfn")
	}
	out, err := run("admitfn", c.admitfn, append(args, "--help"))
	if err != nil {
		return err
	}
	_, usage, _ := strings.Cut(out, "Usage:\n")
	var path []string
	for _, f := range strings.Fields(strings.SplitN(usage, "\n", 2)[0])[1:] {
		if !regexp.MustCompile(`^[a-z][a-z0-9-]*$`).MatchString(f) {
			break
		}
		path = append(path, f)
	}
	// A command with subcommands takes no argument but one of them.
	stray := len(args) > len(path) && !strings.HasPrefix(args[len(path)], "-") && strings.Contains(out, "\nAvailable Commands:\n")
	if len(args) < len(path) || !slices.Equal(args[:len(path)], path) || stray {
		return fmt.Errorf("admitfn %s: no such command (--help shows %q)", strings.Join(args, " "), strings.Join(append([]string{"admitfn"}, path...), " "))
	}
	return nil
}

// serverArgs runs the server with the arguments and -h: pflag parses every
// flag before it, and a stray argument stops the parse with an error.
func (c *commands) serverArgs(args []string) error {
	if c.server == "" {
		c.server = testbin.Path(c.t, "server")
	}
	_, err := run("server", c.server, append(args, "-h"))
	return err
}

func run(name, path string, args []string) (string, error) {
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		first, _, _ := strings.Cut(string(out), "\n")
		return "", fmt.Errorf("%s %s: %v: %s", name, strings.Join(args[:len(args)-1], " "), err, first)
	}
	return string(out), nil
}

func (c *commands) terraform(dir string, args []string) error {
	for i, a := range args {
		if a != "-var" || i+1 == len(args) {
			continue
		}
		v, _, _ := strings.Cut(args[i+1], "=")
		tf, _ := filepath.Glob(filepath.Join(c.root, dir, "*.tf"))
		if len(tf) == 0 {
			return fmt.Errorf("terraform: no .tf files in %s", dir)
		}
		declared := false
		for _, f := range tf {
			src, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			declared = declared || strings.Contains(string(src), `variable "`+v+`"`)
		}
		if !declared {
			return fmt.Errorf("terraform: %s declares no variable %q", dir, v)
		}
	}
	return nil
}

// routes are the local server's, as functions/server serves them.
var routes = regexp.MustCompile(`^http://127\.0\.0\.1:8080/(validate|mutate|healthz|readyz|metrics)([/?]|$)`)

func (c *commands) curl(args []string) error {
	for _, a := range args {
		if f, ok := strings.CutPrefix(a, "@"); ok {
			if _, err := os.Stat(filepath.Join(c.root, f)); err != nil {
				return fmt.Errorf("curl: no file %s", f)
			}
		}
		if strings.HasPrefix(a, "http://127.0.0.1:8080") && !routes.MatchString(a) {
			return fmt.Errorf("curl: the server serves no route %s", strings.TrimPrefix(a, "http://127.0.0.1:8080"))
		}
	}
	return nil
}
