// Package eksauth makes EKS tokens from the function's AWS credentials,
// for functions/cluster.
package eksauth

import (
	"context"
	"encoding/base64"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/admitfn/admitfn/functions/cluster"
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

// Tokens makes EKS tokens from the function's own AWS credentials (the
// SDK's default chain: the Lambda role).
func Tokens(e cluster.EKS) cluster.TokenSource {
	return func(ctx context.Context) (string, time.Time, error) {
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
	}
}
