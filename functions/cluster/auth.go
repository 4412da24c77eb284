package cluster

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
)

// eksTokenLifetime is how long a token is used: EKS accepts one for 15
// minutes after it is signed.
const eksTokenLifetime = 10 * time.Minute

// eksToken is what `aws eks get-token` prints: a presigned STS
// GetCallerIdentity URL that names the cluster in the signed
// x-k8s-aws-id header, which EKS's authenticator calls to learn the
// function's IAM identity.
func eksToken(ctx context.Context, cfg aws.Config, clusterName string) (string, error) {
	presign := sts.NewPresignClient(sts.NewFromConfig(cfg))
	req, err := presign.PresignGetCallerIdentity(ctx, &sts.GetCallerIdentityInput{}, func(o *sts.PresignOptions) {
		o.ClientOptions = append(o.ClientOptions, func(o *sts.Options) {
			o.APIOptions = append(o.APIOptions,
				smithyhttp.SetHeaderValue("x-k8s-aws-id", clusterName),
				smithyhttp.SetHeaderValue("X-Amz-Expires", "60"))
		})
	})
	if err != nil {
		return "", err
	}
	return "k8s-aws-v1." + base64.RawURLEncoding.EncodeToString([]byte(req.URL)), nil
}

// eksTransport adds an EKS token made from the function's own AWS
// credentials (the SDK's default chain: the Lambda role), renewed before
// it expires.
func eksTransport(e EKS) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper {
		return &bearer{next: rt, token: func(ctx context.Context) (string, time.Time, error) {
			opts := []func(*awsconfig.LoadOptions) error{}
			if e.Region != "" {
				opts = append(opts, awsconfig.WithRegion(e.Region))
			}
			cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
			if err != nil {
				return "", time.Time{}, err
			}
			t, err := eksToken(ctx, cfg, e.ClusterName)
			return t, time.Now().Add(eksTokenLifetime), err
		}}
	}
}

// gkeTransport adds an access token of the function's Google service
// account (Application Default Credentials: the metadata server on Cloud
// Functions).
func gkeTransport() func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper {
		var (
			once sync.Once
			src  oauth2.TokenSource
			err  error
		)
		return &bearer{next: rt, token: func(ctx context.Context) (string, time.Time, error) {
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
		}}
	}
}

// bearer sets Authorization from a token it renews when it expires. A
// token error fails the request with a message that names no credential.
type bearer struct {
	next  http.RoundTripper
	token func(context.Context) (string, time.Time, error)

	mu      sync.Mutex
	current string
	expires time.Time
}

func (b *bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	b.mu.Lock()
	if b.current == "" || !time.Now().Before(b.expires) {
		t, exp, err := b.token(req.Context())
		if err != nil {
			b.mu.Unlock()
			return nil, fmt.Errorf("cannot get a token for the cluster: %w", err)
		}
		b.current, b.expires = t, exp
	}
	t := b.current
	b.mu.Unlock()
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+t)
	return b.next.RoundTrip(req)
}
