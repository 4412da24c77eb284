// Package srcrev names the source a make build is compiled from, for
// binaries the Go toolchain does not stamp (-buildvcs=false, or GOFLAGS
// that say so): the commit, and for a tree with changes a digest of them.
// Two binaries stamped alike were built from the same source, so a bundle
// one compiled needs no compiling again before the other serves it
// (bundle.Toolchain).
package srcrev

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// VersionPackage holds the variable Ldflags sets.
const VersionPackage = "github.com/admitfn/admitfn/core/version"

// Revision is the commit of the work tree, or "" outside one. A tree with
// changes to what a build reads gets "-changed-" and the first 12 hex
// digits of a sha256 over them (the diff against the commit and every
// untracked file that is not ignored): pinned to the source, unlike Go's
// own "-dirty". Changes to tests and Markdown build nothing and are left
// out, so editing a test does not make the binaries built before it
// another build.
func Revision(ctx context.Context) string {
	git := func(args ...string) ([]byte, error) {
		return exec.CommandContext(ctx, "git", args...).Output()
	}
	top, err := git("rev-parse", "--show-toplevel")
	if err != nil {
		return ""
	}
	root := strings.TrimSpace(string(top))
	head, err := git("-C", root, "rev-parse", "HEAD")
	if err != nil {
		return ""
	}
	rev := strings.TrimSpace(string(head))
	built := []string{"--", ".", ":(exclude)*_test.go", ":(exclude)*.md"}
	diff, err := git(append([]string{"-C", root, "diff", "HEAD", "--binary"}, built...)...)
	if err != nil {
		return ""
	}
	untracked, err := git(append([]string{"-C", root, "ls-files", "--others", "--exclude-standard", "-z"}, built...)...)
	if err != nil {
		return ""
	}
	if len(diff) == 0 && len(untracked) == 0 {
		return rev
	}
	h := sha256.New()
	h.Write(diff)
	for _, name := range bytes.Split(untracked, []byte{0}) {
		if len(name) == 0 {
			continue // after the last name's NUL
		}
		data, err := os.ReadFile(filepath.Join(root, string(name)))
		if err != nil {
			return ""
		}
		h.Write(name)
		h.Write([]byte{0})
		sum := sha256.Sum256(data)
		h.Write(sum[:])
	}
	return rev + "-changed-" + hex.EncodeToString(h.Sum(nil))[:12]
}

// Ldflags stamps rev as the binary's revision (version.Get's Revision);
// "" for no revision.
func Ldflags(rev string) string {
	if rev == "" {
		return ""
	}
	return "-X " + VersionPackage + ".releaseRevision=" + rev
}
