//go:build admitfn_nogcs

package anystore

import (
	"context"

	"github.com/admitfn/admitfn/functions/bundle/store"
)

func openGCS(_ context.Context, loc store.Location) (store.Bucket, error) {
	return nil, notBuiltIn(loc, "admitfn_nogcs")
}
