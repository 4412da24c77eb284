//go:build !admitfn_nos3

package anystore

import (
	"context"

	"github.com/admitfn/admitfn/functions/bundle/store"
	"github.com/admitfn/admitfn/functions/bundle/store/s3store"
)

func openS3(ctx context.Context, loc store.Location, opts Options) (store.Bucket, error) {
	return s3store.Open(ctx, loc, s3store.Options{PathStyle: opts.S3PathStyle})
}
