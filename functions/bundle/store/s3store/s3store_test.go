package s3store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/admitfn/admitfn/functions/bundle/store"
	"github.com/admitfn/admitfn/functions/bundle/store/s3store"
	"github.com/admitfn/admitfn/functions/bundle/store/storetest"
)

func TestContract(t *testing.T) {
	s := storetest.StartS3(t)
	for _, versioned := range []bool{true, false} {
		name := map[bool]string{true: "versioned", false: "unversioned"}[versioned]
		t.Run(name, func(t *testing.T) {
			s.CreateBucket(t, name, versioned)
			c := s.Client(s.Endpoint)
			storetest.Contract(t,
				s3store.New(c, store.Location{Scheme: "s3", Bucket: name, Prefix: "team/prod"}),
				s3store.New(c, store.Location{Scheme: "s3", Bucket: name, Prefix: "team/prodx"}), versioned)
		})
	}
}

// Open configures the client the way a function does: from the SDK's
// environment, with path-style addressing asked for.
func TestOpenFromEnvironment(t *testing.T) {
	s := storetest.StartS3(t)
	s.CreateBucket(t, "env", false)
	s.SetEnv(t)
	b, err := s3store.Open(context.Background(), store.Location{Scheme: "s3", Bucket: "env", Prefix: "p"}, s3store.Options{PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(context.Background(), "x.yaml", []byte("x"), "application/yaml"); err != nil {
		t.Fatal(err)
	}
	if data, _, err := b.Get(context.Background(), "x.yaml", ""); err != nil || string(data) != "x" {
		t.Fatalf("Get: %q %v", data, err)
	}
	if b.Location() != "s3://env/p" {
		t.Errorf("Location %q", b.Location())
	}
}

// Failures name the object and the HTTP status, without request IDs, so
// that a repeated failure reads the same (and is logged once).
func TestErrors(t *testing.T) {
	s := storetest.StartS3(t)
	p := storetest.NewProxy(t, s.Endpoint, false)
	b := s3store.New(s.Client(p.URL), store.Location{Scheme: "s3", Bucket: "nope", Prefix: "p"})
	_, _, err := b.Get(context.Background(), "x.yaml", "")
	if !errors.Is(err, store.ErrNoBucket) || err.Error() != "s3://nope/p: bucket does not exist" {
		t.Errorf("missing bucket: %v", err)
	}
	p.Set(storetest.Fail500)
	_, _, err1 := b.Get(context.Background(), "x.yaml", "")
	_, _, err2 := b.Get(context.Background(), "x.yaml", "")
	if err1 == nil || err1.Error() != "s3://nope/p/x.yaml: HTTP 500 InternalServerError: Internal Server Error" || err2.Error() != err1.Error() {
		t.Errorf("500s: %v / %v", err1, err2)
	}
}
