// Package gkeauth gives GKE the access tokens of the function's Google
// service account, for functions/cluster.
package gkeauth

import (
	"context"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	"github.com/admitfn/admitfn/functions/cluster"
)

// Tokens gives access tokens of the function's Google service account
// (Application Default Credentials: the metadata server on Cloud
// Functions).
func Tokens(cluster.GKE) cluster.TokenSource {
	var (
		once sync.Once
		src  oauth2.TokenSource
		err  error
	)
	return func(ctx context.Context) (string, time.Time, error) {
		once.Do(func() {
			src, err = google.DefaultTokenSource(context.Background(), "https://www.googleapis.com/auth/cloud-platform")
		})
		if err != nil {
			return "", time.Time{}, err
		}
		t, err := src.Token()
		if err != nil {
			return "", time.Time{}, err
		}
		return t.AccessToken, t.Expiry.Add(-time.Minute), nil
	}
}
