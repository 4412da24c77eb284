package srcrev

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// git runs git in dir, failing the test on error.
func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// The revision is a digest of the source: the same for the same files at
// any commit, another for any edit or untracked file (tests and Markdown
// left out), and nothing outside a work tree.
func TestRevision(t *testing.T) {
	dir := t.TempDir()
	git(t, dir, "init", "-q")
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("main.go", "package main\n")
	git(t, dir, "add", ".")
	git(t, dir, "commit", "-q", "-m", "first")
	t.Chdir(dir)
	ctx := context.Background()
	clean := Revision(ctx)
	if !regexp.MustCompile(`^src-[0-9a-f]{16}$`).MatchString(clean) {
		t.Fatalf("clean tree: %q", clean)
	}
	write("main_test.go", "package main\n")
	write("NOTES.md", "notes\n")
	if got := Revision(ctx); got != clean {
		t.Fatalf("a test and a Markdown file added: %q, want %q", got, clean)
	}
	git(t, dir, "add", ".")
	git(t, dir, "commit", "-q", "-m", "second")
	if got := Revision(ctx); got != clean {
		t.Fatalf("the same source at another commit: %q, want %q", got, clean)
	}
	write("main.go", "package main\n\nfunc main() {}\n")
	edited := Revision(ctx)
	if edited == clean || !regexp.MustCompile(`^src-[0-9a-f]{16}$`).MatchString(edited) {
		t.Fatalf("an edit: %q (before %q)", edited, clean)
	}
	write("other.go", "package main\n")
	added := Revision(ctx)
	if added == edited {
		t.Fatalf("an untracked file beside the edit: %q, as the edit alone", added)
	}
	if again := Revision(ctx); again != added {
		t.Fatalf("the same tree twice: %q and %q", added, again)
	}
	t.Chdir(t.TempDir())
	if got := Revision(ctx); got != "" {
		t.Fatalf("outside a work tree: %q", got)
	}
	if Ldflags("") != "" || Ldflags("abc") != "-X github.com/admitfn/admitfn/core/version.releaseRevision=abc" {
		t.Errorf("Ldflags: %q %q", Ldflags(""), Ldflags("abc"))
	}
}
