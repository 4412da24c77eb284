// Package lambdabuild builds the Lambda deployment package: a static
// `bootstrap` for the provided.al2023 runtime, zipped reproducibly, so the
// same source gives the same bytes (and the same source_code_hash).
package lambdabuild

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/admitfn/admitfn/hack/build/srcrev"
	"github.com/admitfn/admitfn/hack/build/zipfile"
)

// Package is the function's Go package.
const Package = "github.com/admitfn/admitfn/functions/awslambda"

// Flags are the go build flags of a bootstrap: no RPC mode (provided
// runtimes use the Runtime API only), no paths, VCS stamps or build ids
// that would make two builds of one source differ, no symbol tables. (The
// bootstrap links no GCS client: it reads its bundle from S3 or its
// package.)
var Flags = []string{"-tags", "lambda.norpc", "-trimpath", "-buildvcs=false", "-ldflags", "-s -w -buildid="}

// Build compiles pkg for linux/goarch with Flags into binary, stamped with
// the revision of the source (srcrev).
func Build(ctx context.Context, pkg, goarch, binary string) error {
	ldflags := ""
	if stamp := srcrev.Ldflags(srcrev.Revision(ctx)); stamp != "" {
		ldflags = Flags[len(Flags)-1] + " " + stamp
	}
	return BuildWith(ctx, pkg, goarch, binary, ldflags)
}

// BuildWith is Build with ldflags in place of Flags' (a release stamps its
// version with -X) and tags added to Flags' (a benchmark's baseline links
// more packages with them).
func BuildWith(ctx context.Context, pkg, goarch, binary, ldflags string, tags ...string) error {
	args := append([]string{"build"}, Flags...)
	if ldflags != "" {
		args[len(args)-1] = ldflags
	}
	if len(tags) > 0 {
		i := slices.Index(args, "-tags") + 1
		args[i] = strings.Join(append([]string{args[i]}, tags...), ",")
	}
	args = append(args, "-o", binary, pkg)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch, "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s for linux/%s: %v\n%s", pkg, goarch, err, out)
	}
	return nil
}

// Zip writes an archive holding binary as an executable `bootstrap`.
func Zip(w io.Writer, binary string) error {
	data, err := os.ReadFile(binary)
	if err != nil {
		return err
	}
	return zipfile.Write(w, []zipfile.Entry{{Name: "bootstrap", Mode: 0o755, Data: data}})
}

// BuildZip builds pkg for goarch and writes the zip to out; it returns the
// binary's size.
func BuildZip(ctx context.Context, pkg, goarch, out string) (binarySize int64, err error) {
	dir, err := os.MkdirTemp("", "admitfn-lambda-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "bootstrap")
	if err := Build(ctx, pkg, goarch, bin); err != nil {
		return 0, err
	}
	fi, err := os.Stat(bin)
	if err != nil {
		return 0, err
	}
	var buf bytes.Buffer
	if err := Zip(&buf, bin); err != nil {
		return 0, err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return 0, err
	}
	return fi.Size(), os.WriteFile(out, buf.Bytes(), 0o644)
}
