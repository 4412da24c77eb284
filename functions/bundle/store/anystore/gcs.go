//go:build !admitfn_nogcs

package anystore

import (
	"context"

	"github.com/admitfn/admitfn/functions/bundle/store"
	"github.com/admitfn/admitfn/functions/bundle/store/gcsstore"
)

func openGCS(ctx context.Context, loc store.Location) (store.Bucket, error) {
	return gcsstore.Open(ctx, loc)
}
