// Package anystore opens the bucket of any bundle location: a directory,
// s3:// (aws-sdk-go-v2) or gs:// (cloud.google.com/go/storage).
//
// Each SDK adds megabytes to a binary and time to its start, so a build can
// leave one out: -tags admitfn_nogcs or admitfn_nos3. `make lambda` builds
// without GCS; such a build refuses gs:// with a clear error.
package anystore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"

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
	var o Options
	if v := getenv("ADMITFN_S3_PATH_STYLE"); v != "" {
		var err error
		if o.S3PathStyle, err = strconv.ParseBool(v); err != nil {
			return o, fmt.Errorf("ADMITFN_S3_PATH_STYLE=%q: want true or false", v)
		}
	}
	return o, nil
}

// ErrNotBuiltIn: this binary was built without the location's backend.
var ErrNotBuiltIn = errors.New("storage backend not built in")

// Open returns the bucket of loc. A directory must exist unless create is
// set, when it is made (a push target).
func Open(ctx context.Context, loc store.Location, opts Options, create bool) (store.Bucket, error) {
	switch loc.Scheme {
	case "s3":
		return openS3(ctx, loc, opts)
	case "gs":
		return openGCS(ctx, loc)
	}
	if create {
		if err := os.MkdirAll(loc.Bucket, 0o755); err != nil {
			return nil, err
		}
	}
	fi, err := os.Stat(loc.Bucket)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", loc.Bucket)
	}
	return store.NewDir(loc.Bucket), nil
}

func notBuiltIn(loc store.Location, tag string) error {
	return fmt.Errorf("%s: %w: this binary was built with -tags %s", loc, ErrNotBuiltIn, tag)
}
