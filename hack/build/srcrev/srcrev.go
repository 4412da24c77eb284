// Package srcrev names the source a make build is compiled from, for
// binaries the Go toolchain does not stamp (-buildvcs=false, or GOFLAGS
// that say so): a digest of the files a build reads. Two binaries stamped
// alike were built from the same source, so a bundle one compiled needs no
// compiling again before the other serves it (bundle.Toolchain); and one
// source gives one stamp, at any commit, so a build stays reproducible.
package srcrev

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// VersionPackage holds the variable Ldflags sets.
const VersionPackage = "github.com/admitfn/admitfn/core/version"

// Revision is "src-" and 16 hex digits of a sha256 over the work tree's
// files, tracked or not (but not ignored), with their names; "" outside a
// work tree. Tests and Markdown build nothing and are left out, so editing
// a test does not make the binaries built before it another build.
func Revision(ctx context.Context) string {
	top, err := exec.CommandContext(ctx, "git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return ""
	}
	root := strings.TrimSpace(string(top))
	list, err := exec.CommandContext(ctx, "git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard",
		"--", ".", ":(exclude)*_test.go", ":(exclude)*.md").Output()
	if err != nil {
		return ""
	}
	var names []string
	for _, name := range bytes.Split(list, []byte{0}) {
		if len(name) > 0 {
			names = append(names, string(name))
		}
	}
	slices.Sort(names)
	names = slices.Compact(names) // an unmerged file is listed once per stage
	h := sha256.New()
	for _, name := range names {
		data, err := os.ReadFile(filepath.Join(root, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the work tree
		}
		if err != nil {
			return ""
		}
		sum := sha256.Sum256(data)
		h.Write([]byte(name))
		h.Write([]byte{0})
		h.Write(sum[:])
	}
	return "src-" + hex.EncodeToString(h.Sum(nil))[:16]
}

// Ldflags stamps rev as the binary's revision (version.Get's Revision);
// "" for no revision.
func Ldflags(rev string) string {
	if rev == "" {
		return ""
	}
	return "-X " + VersionPackage + ".releaseRevision=" + rev
}
