package policy_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/admitfn/admitfn/core/policy"
)

// tree writes files (content, or "->target" for a symbolic link) under a
// new directory and returns it.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		if len(content) > 2 && content[:2] == "->" {
			err = os.Symlink(content[2:], p)
		} else {
			err = os.WriteFile(p, []byte(content), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func names(t *testing.T, root string) ([]string, error) {
	t.Helper()
	sources, err := policy.ReadFS(os.DirFS(root), ".")
	var got []string
	for _, s := range sources {
		got = append(got, s.Name+"="+string(s.Data))
	}
	return got, err
}

func TestReadFSFollowsLinksInsideTheBundle(t *testing.T) {
	for name, tc := range map[string]struct {
		files map[string]string
		want  []string
	}{
		// kubelet's layout of a mounted ConfigMap: every file a link into
		// ..data, itself a link to a hidden, timestamped directory.
		"ConfigMap volume": {map[string]string{
			"..2026_11_25_10_00_00.1234/policy.yaml":  "p",
			"..2026_11_25_10_00_00.1234/binding.yaml": "b",
			"..data":       "->..2026_11_25_10_00_00.1234",
			"policy.yaml":  "->..data/policy.yaml",
			"binding.yaml": "->..data/binding.yaml",
		}, []string{"binding.yaml=b", "policy.yaml=p"}},
		"linked file": {map[string]string{
			"shared/common.yaml": "c",
			"team/common.yaml":   "->../shared/common.yaml",
		}, []string{"shared/common.yaml=c", "team/common.yaml=c"}},
		"linked directory": {map[string]string{
			"real/a.yaml": "a",
			"alias":       "->real",
		}, []string{"alias/a.yaml=a", "real/a.yaml=a"}},
		"a loop is walked once": {map[string]string{
			"sub/a.yaml": "a",
			"sub/loop":   "->..",
		}, []string{"sub/a.yaml=a"}},
		"links the bundle never reads": {map[string]string{
			"a.yaml":    "a",
			"README.md": "->/etc/passwd",
			".hidden":   "->/etc",
		}, []string{"a.yaml=a"}},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := names(t, tree(t, tc.files))
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %q, %v\nwant %q", got, err, tc.want)
			}
		})
	}
}

// A link that leaves the bundle is an error, not a file skipped: skipping it
// would load a bundle without a policy the author sees in the directory.
func TestReadFSRefusesLinksOutOfTheBundle(t *testing.T) {
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "x.yaml"), []byte("x"), 0o644)
	for name, tc := range map[string]struct {
		files map[string]string
		want  string
	}{
		"relative file link": {map[string]string{"a.yaml": "->../" + filepath.Base(outside) + "/x.yaml"},
			"read policy bundle: a.yaml: a.yaml -> ../" + filepath.Base(outside) + "/x.yaml: symbolic link leads outside the bundle directory"},
		"absolute file link": {map[string]string{"a.yaml": "->" + outside + "/x.yaml"},
			"read policy bundle: a.yaml: a.yaml -> " + outside + "/x.yaml: symbolic link leads outside the bundle directory (absolute targets are not followed)"},
		"directory link": {map[string]string{"ok.yaml": "o", "more": "->" + outside},
			"read policy bundle: more: more -> " + outside + ": symbolic link leads outside the bundle directory (absolute targets are not followed)"},
		"through a link inside": {map[string]string{"up": "->sub/..", "sub/x": "s", "a.yaml": "->up/../x.yaml"},
			"read policy bundle: a.yaml: up -> sub/..: symbolic link leads outside the bundle directory"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := names(t, tree(t, tc.files))
			if !errors.Is(err, policy.ErrSymlinkEscapes) || err.Error() != tc.want {
				t.Fatalf("got %q, %v\nwant %s", got, err, tc.want)
			}
		})
	}
}

// A rejected bundle keeps, logs and shows at most MaxErrors problems, and
// says how many there were.
func TestErrorListIsCapped(t *testing.T) {
	const n = 20000
	var doc strings.Builder
	for i := range n {
		fmt.Fprintf(&doc, "---\napiVersion: v1\nkind: Nope\nmetadata: {name: n%d}\n", i)
	}
	_, err := policy.Parse([]policy.Source{{Name: "bad.yaml", Data: []byte(doc.String())}})
	var errs policy.Errors
	if !errors.As(err, &errs) {
		t.Fatalf("error %T %v", err, err)
	}
	msg := err.Error()
	if len(errs) != policy.MaxErrors+1 || errs.Count() != n ||
		!strings.HasPrefix(msg, "20000 errors in policy bundle:\n  bad.yaml: document 1: unknown kind \"Nope\"") ||
		!strings.HasSuffix(msg, "\n  … and 19900 more") || strings.Count(msg, "\n") != policy.MaxErrors+1 {
		t.Fatalf("%d kept, %d counted, %d lines, ends %q", len(errs), errs.Count(), strings.Count(msg, "\n"), msg[len(msg)-40:])
	}
}
