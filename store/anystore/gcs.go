//go:build !admitfn_nogcs

package anystore

import (
	"context"

	"github.com/admitfn/admitfn/store"
	"github.com/admitfn/admitfn/store/gcsstore"
)

func openGCS(ctx context.Context, loc store.Location) (store.Bucket, error) {
	return gcsstore.Open(ctx, loc)
}
