// Package s3store is the S3 backend of store.Bucket, through aws-sdk-go-v2:
// the default credential chain (a Lambda's role just works), and
// S3-compatible servers through the SDK's AWS_ENDPOINT_URL_S3.
package s3store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/admitfn/admitfn/functions/bundle/store"
)

// Options tune the client beyond what the SDK reads from the environment.
type Options struct {
	// Region overrides the region of the default chain (AWS_REGION, the
	// shared config), which is us-east-1 when neither names one.
	Region string
	// PathStyle addresses buckets as https://host/bucket, as most
	// S3-compatible servers need.
	PathStyle bool
}

// Bucket is a prefix of an S3 bucket.
type Bucket struct {
	client *s3.Client
	loc    store.Location
}

var (
	_ store.Bucket  = (*Bucket)(nil)
	_ store.Remover = (*Bucket)(nil)
)

// Open returns the bucket of loc (scheme s3) with a client configured by the
// SDK's default chain.
func Open(ctx context.Context, loc store.Location, opts Options) (*Bucket, error) {
	var loadOpts []func(*config.LoadOptions) error
	if opts.Region != "" {
		loadOpts = append(loadOpts, config.WithRegion(opts.Region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, loadOpts...)
	if err != nil {
		return nil, fmt.Errorf("aws configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.UsePathStyle = opts.PathStyle
	})
	return New(client, loc), nil
}

// New returns the bucket of loc served by client.
func New(client *s3.Client, loc store.Location) *Bucket {
	return &Bucket{client: client, loc: loc}
}

func (b *Bucket) Location() string { return b.loc.String() }

func (b *Bucket) Get(ctx context.Context, key, ifNoneMatch string) ([]byte, store.Object, error) {
	in := &s3.GetObjectInput{Bucket: aws.String(b.loc.Bucket), Key: aws.String(b.loc.Key(key))}
	if ifNoneMatch != "" {
		in.IfNoneMatch = aws.String(ifNoneMatch)
	}
	out, err := b.client.GetObject(ctx, in)
	if err != nil {
		return nil, store.Object{}, b.err(err, key)
	}
	defer out.Body.Close()
	data, err := store.ReadAll(key, out.Body)
	if err != nil {
		return nil, store.Object{}, err
	}
	return data, store.Object{Key: key, Size: int64(len(data)), ETag: aws.ToString(out.ETag), Version: version(out.VersionId)}, nil
}

func (b *Bucket) GetVersion(ctx context.Context, key, v string) ([]byte, error) {
	in := &s3.GetObjectInput{Bucket: aws.String(b.loc.Bucket), Key: aws.String(b.loc.Key(key))}
	if v != "" {
		in.VersionId = aws.String(v)
	}
	out, err := b.client.GetObject(ctx, in)
	if err != nil {
		return nil, b.err(err, key)
	}
	defer out.Body.Close()
	return store.ReadAll(key, out.Body)
}

func (b *Bucket) List(ctx context.Context) ([]store.Object, error) {
	in := &s3.ListObjectsV2Input{Bucket: aws.String(b.loc.Bucket)}
	if b.loc.Prefix != "" {
		in.Prefix = aws.String(b.loc.Prefix + "/")
	}
	var objs []store.Object
	for p := s3.NewListObjectsV2Paginator(b.client, in); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, b.err(err, "")
		}
		for _, o := range page.Contents {
			rel, ok := b.loc.Rel(aws.ToString(o.Key))
			if !ok || strings.HasSuffix(rel, "/") {
				continue
			}
			objs = append(objs, store.Object{Key: rel, Size: aws.ToInt64(o.Size), ETag: aws.ToString(o.ETag)})
		}
	}
	return objs, nil
}

func (b *Bucket) Put(ctx context.Context, key string, data []byte, contentType string) (store.Object, error) {
	return b.put(ctx, key, data, contentType, nil)
}

// PutIf is S3's conditional write: If-Match on the ETag read, or
// If-None-Match: * for an object that must not exist yet.
func (b *Bucket) PutIf(ctx context.Context, key string, data []byte, contentType, ifMatch string) (store.Object, error) {
	return b.put(ctx, key, data, contentType, func(in *s3.PutObjectInput) {
		if ifMatch == "" {
			in.IfNoneMatch = aws.String("*")
		} else {
			in.IfMatch = aws.String(ifMatch)
		}
	})
}

func (b *Bucket) put(ctx context.Context, key string, data []byte, contentType string, cond func(*s3.PutObjectInput)) (store.Object, error) {
	in := &s3.PutObjectInput{
		Bucket:        aws.String(b.loc.Bucket),
		Key:           aws.String(b.loc.Key(key)),
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
		ContentType:   aws.String(contentType),
	}
	if cond != nil {
		cond(in)
	}
	out, err := b.client.PutObject(ctx, in)
	if err != nil {
		return store.Object{}, b.err(err, key)
	}
	return store.Object{Key: key, Size: int64(len(data)), ETag: aws.ToString(out.ETag), Version: version(out.VersionId)}, nil
}

// Remove deletes key: on a versioned bucket a delete marker, which leaves
// the versions a manifest pins readable.
func (b *Bucket) Remove(ctx context.Context, key string) error {
	_, err := b.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(b.loc.Bucket), Key: aws.String(b.loc.Key(key))})
	if err != nil {
		return b.err(err, key)
	}
	return nil
}

// version drops S3's "null" version id: objects written while versioning
// was off have it, and it names no version worth pinning.
func version(v *string) string {
	if s := aws.ToString(v); s != "null" {
		return s
	}
	return ""
}

// err maps S3's answers to the store's errors: 304 to ErrNotModified, 404
// (NoSuchKey, NoSuchVersion) to ErrNotFound, NoSuchBucket to ErrNoBucket,
// 412 (and 409 ConditionalRequestConflict) to ErrConflict.
func (b *Bucket) err(err error, key string) error {
	where := b.loc.String()
	if key != "" {
		where = b.loc.String() + "/" + key
	}
	var re *awshttp.ResponseError
	if !errors.As(err, &re) || re.HTTPStatusCode() == 0 {
		// No answer at all (connection refused, timeout): the SDK's text
		// says why.
		return fmt.Errorf("%s: %w", where, err)
	}
	code := re.HTTPStatusCode()
	var ae smithy.APIError
	switch {
	case code == http.StatusNotModified:
		return store.ErrNotModified
	case code == http.StatusNotFound && errors.As(err, &ae) && ae.ErrorCode() == "NoSuchBucket":
		return fmt.Errorf("%s: %w", b.loc.String(), store.ErrNoBucket)
	case code == http.StatusNotFound:
		return fmt.Errorf("%s: %w", where, store.ErrNotFound)
	case code == http.StatusPreconditionFailed || code == http.StatusConflict && errors.As(err, &ae) && ae.ErrorCode() == "ConditionalRequestConflict":
		// 409: a conditional write raced another write to the key.
		return fmt.Errorf("%s: %w", where, store.ErrConflict)
	}
	// The SDK's text carries request IDs, which differ on every attempt;
	// the status and S3's error code say what went wrong, and read the same
	// each time the same thing does.
	msg := fmt.Sprintf("%s: HTTP %d", where, code)
	if errors.As(err, &ae) && ae.ErrorCode() != "" && ae.ErrorCode() != strconv.Itoa(code) && ae.ErrorCode() != "UnknownError" {
		msg += " " + ae.ErrorCode()
		if m := ae.ErrorMessage(); m != "" {
			msg += ": " + m
		}
	}
	return errors.New(msg)
}
