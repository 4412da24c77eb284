// Package anystore opens the bucket of any bundle location: a directory,
// s3:// (aws-sdk-go-v2) or gs:// (cloud.google.com/go/storage): the
// server's and the CLI's. The Lambda and the Cloud Function import only
// their own cloud's backend.
//
// Each SDK adds megabytes to a binary and time to its start, so a build can
// leave one out: -tags admitfn_nogcs or admitfn_nos3; such a build refuses
// the location with a clear error.
package anystore

import (
	"context"
	"fmt"

	"github.com/admitfn/admitfn/functions/bundle/store"
)

// Options configure the object-store clients beyond their SDKs' own
// environment.
type Options struct {
	// S3PathStyle: ADMITFN_S3_PATH_STYLE, for S3-compatible servers.
	S3PathStyle bool
}

// OptionsFromEnv reads Options from the environment: ADMITFN_S3_PATH_STYLE.
func OptionsFromEnv(getenv func(string) string) (Options, error) {
	pathStyle, err := store.S3PathStyle(getenv)
	return Options{S3PathStyle: pathStyle}, err
}

// ErrNotBuiltIn: this binary was built without the location's backend.
var ErrNotBuiltIn = store.ErrNotBuiltIn

// Open returns the bucket of loc. A directory must exist unless create is
// set, when it is made (a push target).
func Open(ctx context.Context, loc store.Location, opts Options, create bool) (store.Bucket, error) {
	switch loc.Scheme {
	case "s3":
		return openS3(ctx, loc, opts)
	case "gs":
		return openGCS(ctx, loc)
	}
	return store.OpenDir(loc.Bucket, create)
}

func notBuiltIn(loc store.Location, tag string) error {
	return fmt.Errorf("%s: %w: this binary was built with -tags %s", loc, ErrNotBuiltIn, tag)
}
