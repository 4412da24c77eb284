//go:build admitfn_fallbackroots

package main

// The release image has no CA certificates of its own (no distribution
// under it): the server carries Mozilla's roots, used only where the system
// has none, to reach S3 and GCS.
import _ "golang.org/x/crypto/x509roots/fallback"
