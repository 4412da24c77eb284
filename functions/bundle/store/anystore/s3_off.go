//go:build admitfn_nos3

package anystore

import (
	"context"

	"github.com/admitfn/admitfn/functions/bundle/store"
)

func openS3(_ context.Context, loc store.Location, _ Options) (store.Bucket, error) {
	return nil, notBuiltIn(loc, "admitfn_nos3")
}
