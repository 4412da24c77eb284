// Package anystore opens the bucket of any bundle location: a directory,
// s3:// (aws-sdk-go-v2) or gs:// (cloud.google.com/go/storage).
package anystore

import (
	"context"
	"fmt"
	"os"

	"github.com/admitfn/admitfn/store"
	"github.com/admitfn/admitfn/store/gcsstore"
	"github.com/admitfn/admitfn/store/s3store"
)

// Options configure the object-store clients beyond their SDKs' own
// environment.
type Options struct {
	// S3PathStyle: ADMITFN_S3_PATH_STYLE, for S3-compatible servers.
	S3PathStyle bool
}

// Open returns the bucket of loc. A directory must exist unless create is
// set, when it is made (a push target).
func Open(ctx context.Context, loc store.Location, opts Options, create bool) (store.Bucket, error) {
	switch loc.Scheme {
	case "s3":
		return s3store.Open(ctx, loc, s3store.Options{PathStyle: opts.S3PathStyle})
	case "gs":
		return gcsstore.Open(ctx, loc)
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
