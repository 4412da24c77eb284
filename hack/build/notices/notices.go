// Package notices lists the licences of the modules linked into a binary,
// refuses licences a release cannot ship under Apache-2.0, and writes the
// third-party notices file each release artifact carries.
package notices

import (
	"bytes"
	"debug/buildinfo"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/google/licensecheck"
	"golang.org/x/mod/module"
)

// Allowed are the licences a dependency may carry: permissive ones, and
// MPL-2.0, whose file-level copyleft a binary distribution meets by naming
// where the source is. Anything else (GPL, LGPL, AGPL, SSPL, unknown text)
// fails the release.
var Allowed = map[string]bool{
	"Apache-2.0":   true,
	"MIT":          true,
	"MIT-0":        true,
	"BSD-2-Clause": true,
	"BSD-3-Clause": true,
	"ISC":          true,
	"MPL-2.0":      true,
	"Unlicense":    true,
	"CC0-1.0":      true,
}

// Module is a dependency and what its licence files say.
type Module struct {
	Path, Version string
	Dir           string
	Licences      []string // SPDX IDs found
	Files         []File   // licence and notice files, in name order
}

// File is a licence or notice file of a module.
type File struct {
	Name string
	Text []byte
}

// licenceFile matches the names licences and notices go by.
var licenceFile = regexp.MustCompile(`(?i)^(licen[cs]e|copying|notice|patents)([-._].*)?$`)

// FromBinary lists the modules the Go binary at path was linked from.
func FromBinary(path string) ([]Module, error) {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var mods []Module
	for _, d := range bi.Deps {
		if d.Replace != nil {
			d = d.Replace
		}
		mods = append(mods, Module{Path: d.Path, Version: d.Version})
	}
	return mods, nil
}

// FromPackages lists the modules the packages (go list patterns, in the
// module at dir) import, for artifacts that are source, not binaries.
func FromPackages(dir string, env []string, patterns ...string) ([]Module, error) {
	cmd := exec.Command("go", append([]string{"list", "-deps", "-f", "{{with .Module}}{{if not .Main}}{{with .Replace}}{{.Path}} {{.Version}}{{else}}{{.Path}} {{.Version}}{{end}}{{end}}{{end}}"}, patterns...)...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %v", strings.Join(patterns, " "), err)
	}
	seen := map[string]bool{}
	var mods []Module
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line == "" || seen[line] {
			continue
		}
		seen[line] = true
		path, version, _ := strings.Cut(line, " ")
		mods = append(mods, Module{Path: path, Version: version})
	}
	sort.Slice(mods, func(i, j int) bool { return mods[i].Path < mods[j].Path })
	return mods, nil
}

// Classify finds each module's licence files in the module cache at
// modcache and names their licences. It fails for a module with no
// licence file, one whose text is not recognised, or one not Allowed.
func Classify(modcache string, mods []Module) ([]Module, error) {
	var problems []string
	out := make([]Module, 0, len(mods))
	for _, m := range mods {
		if m.Dir == "" {
			ep, err := module.EscapePath(m.Path)
			if err != nil {
				return nil, err
			}
			ev, err := module.EscapeVersion(m.Version)
			if err != nil {
				return nil, err
			}
			m.Dir = filepath.Join(modcache, ep+"@"+ev)
		}
		if err := classify(&m); err != nil {
			problems = append(problems, fmt.Sprintf("%s %s: %v", m.Path, m.Version, err))
		}
		out = append(out, m)
	}
	if len(problems) > 0 {
		return out, fmt.Errorf("dependencies a release cannot ship:\n  %s", strings.Join(problems, "\n  "))
	}
	return out, nil
}

func classify(m *Module) error {
	entries, err := os.ReadDir(m.Dir)
	if err != nil {
		return fmt.Errorf("not in the module cache: %w", err)
	}
	ids := map[string]bool{}
	for _, e := range entries {
		if e.IsDir() || !licenceFile.MatchString(e.Name()) {
			continue
		}
		text, err := os.ReadFile(filepath.Join(m.Dir, e.Name()))
		if err != nil {
			return err
		}
		m.Files = append(m.Files, File{e.Name(), text})
		name := strings.ToLower(e.Name())
		if strings.HasPrefix(name, "notice") || strings.HasPrefix(name, "patents") || strings.Contains(name, "summary") {
			continue // notices and summaries travel with the licences; they are not licences
		}
		cov := licensecheck.Scan(text)
		if cov.Percent < 75 {
			return fmt.Errorf("%s: the licence text is not recognised (%.0f%% matched)", e.Name(), cov.Percent)
		}
		for _, match := range cov.Match {
			ids[match.ID] = true
		}
	}
	if len(ids) == 0 {
		return fmt.Errorf("no licence file")
	}
	for id := range ids {
		m.Licences = append(m.Licences, id)
	}
	sort.Strings(m.Licences)
	var refused []string
	for _, id := range m.Licences {
		if !Allowed[id] {
			refused = append(refused, id)
		}
	}
	if len(refused) > 0 {
		return fmt.Errorf("licensed %s, which admitfn (Apache-2.0) cannot ship", strings.Join(refused, ", "))
	}
	return nil
}

// Write writes the notices file for an artifact built from mods.
func Write(w io.Writer, artifact string, mods []Module) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Third-party notices: %s\n\n", artifact)
	fmt.Fprintf(&b, "admitfn is licensed under Apache-2.0 (LICENSE). %s also contains the\nfollowing modules, under the licences named; their licence and notice\nfiles follow. Each module's source is at its path, at the version given.\n\n", artifact)
	for _, m := range mods {
		fmt.Fprintf(&b, "- %s %s: %s\n", m.Path, m.Version, strings.Join(m.Licences, ", "))
	}
	for _, m := range mods {
		fmt.Fprintf(&b, "\n## %s %s\n", m.Path, m.Version)
		for _, f := range m.Files {
			fmt.Fprintf(&b, "\n### %s\n\n````text\n%s\n````\n", f.Name, bytes.TrimRight(f.Text, "\n"))
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}
