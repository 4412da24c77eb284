package notices

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeModule writes a module whose root holds files.
func fakeModule(t *testing.T, files map[string][]byte) Module {
	dir := t.TempDir()
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return Module{Path: "example.com/m", Version: "v1.0.0", Dir: dir}
}

func licence(t *testing.T, name string) []byte {
	data, err := os.ReadFile("/usr/share/common-licenses/" + name)
	if err != nil {
		t.Fatalf("Debian's licence texts (base-files): %v", err)
	}
	return data
}

// A dependency under a licence admitfn cannot ship fails the release, as
// does one with no licence or an unrecognised one.
func TestClassifyRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string][]byte
		want  string
	}{
		{"GPL-3.0", map[string][]byte{"COPYING": licence(t, "GPL-3")}, "example.com/m v1.0.0: licensed GPL-3.0, which admitfn (Apache-2.0) cannot ship"},
		{"LGPL-3.0", map[string][]byte{"LICENSE": licence(t, "LGPL-3")}, "example.com/m v1.0.0: licensed LGPL-3.0, which admitfn (Apache-2.0) cannot ship"},
		{"GPL-2.0 beside Apache-2.0", map[string][]byte{"LICENSE": licence(t, "Apache-2.0"), "LICENSE.gpl": licence(t, "GPL-2")}, "example.com/m v1.0.0: licensed GPL-2.0, which admitfn (Apache-2.0) cannot ship"},
		{"none", map[string][]byte{"README.md": []byte("hello")}, "example.com/m v1.0.0: no licence file"},
		{"unrecognised", map[string][]byte{"LICENSE": []byte("You may do as you please, except on Tuesdays.\n")}, "example.com/m v1.0.0: LICENSE: the licence text is not recognised (0% matched)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Classify("", []Module{fakeModule(t, tc.files)})
			if err == nil || err.Error() != "dependencies a release cannot ship:\n  "+tc.want {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func TestClassifyAndWrite(t *testing.T) {
	m := fakeModule(t, map[string][]byte{"LICENSE": licence(t, "Apache-2.0"), "NOTICE": []byte("Copyright Example\n")})
	mods, err := Classify("", []Module{m})
	if err != nil || len(mods) != 1 || strings.Join(mods[0].Licences, ",") != "Apache-2.0" {
		t.Fatalf("%v %+v", err, mods)
	}
	var b bytes.Buffer
	if err := Write(&b, "art", mods); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# Third-party notices: art\n", "\n- example.com/m v1.0.0: Apache-2.0\n", "\n## example.com/m v1.0.0\n\n### LICENSE\n\n````text\n", "\n### NOTICE\n\n````text\nCopyright Example\n````\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("notices lack %q:\n%s", want, b.String())
		}
	}
}

// Every module the binaries link today is under a licence a release can
// ship: a new dependency under GPL, say, fails here before any release.
func TestDependencyLicences(t *testing.T) {
	mc, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	repo, _ := filepath.Abs("../../..")
	for _, env := range [][]string{{"GOOS=linux"}, {"GOOS=darwin"}, {"GOOS=windows"}} {
		mods, err := FromPackages(repo, append(os.Environ(), env...), "./cmd/admitfn", "./functions/...")
		if err != nil {
			t.Fatal(err)
		}
		if len(mods) < 50 {
			t.Fatalf("%v: only %d modules listed", env, len(mods))
		}
		if _, err := Classify(strings.TrimSpace(string(mc)), mods); err != nil {
			t.Errorf("%v: %v", env, err)
		}
	}
}
