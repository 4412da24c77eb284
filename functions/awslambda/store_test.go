package main

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/admitfn/admitfn/adapters/awslambda/lambdatest"
	"github.com/admitfn/admitfn/functions/bundle/store"
	"github.com/admitfn/admitfn/functions/bundle/store/s3store"
	"github.com/admitfn/admitfn/functions/bundle/store/storetest"
)

// A cold start while the bucket cannot be read is no init error: reviews
// answer 503 (the webhook's failurePolicy decides) and a later invocation
// loads the bundle once the store is back.
func TestBundleFromS3ColdStartWithStoreDown(t *testing.T) {
	s := storetest.StartS3(t)
	s.CreateBucket(t, "policies", true)
	storetest.PublishDir(t, s3store.New(s.Client(s.Endpoint), store.Location{Scheme: "s3", Bucket: "policies", Prefix: "prod"}), "../../policies/examples")
	s.Stop()

	api, err := lambdatest.NewRuntimeAPI()
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	fn := start(t, bootstrap, api, append(s.Env(), "ADMITFN_POLICIES=s3://policies/prod")...)

	res := invoke(t, api, event(t, "function-url-deny"))
	if res.Err != nil {
		t.Fatalf("function error %v\n%s", res.Err, fn.stdout)
	}
	got := readable(t, res.Payload)
	body, _ := got["body"].(map[string]any)
	if got["statusCode"] != float64(503) || body["kind"] != "Status" || body["reason"] != "ServiceUnavailable" {
		t.Fatalf("without a bundle: %v", got)
	}
	select {
	case fe := <-api.InitErrors():
		t.Fatalf("init error %+v: an unreachable store must not fail the cold start", fe)
	default:
	}
	if !strings.Contains(fn.stdout.String(), `"message":"starting without a bundle from the policy store`) {
		t.Errorf("no start-up warning:\n%s", fn.stdout)
	}
	// Without a bundle nothing runs in the background: invocations are on
	// one P from the start.
	if !strings.Contains(fn.stdout.String(), `"gomaxprocs":1,`) {
		t.Errorf("not on one P:\n%s", fn.stdout)
	}

	s.Start()
	// The first retry is a second after the failed load; then the review
	// itself waits for the load.
	time.Sleep(1100 * time.Millisecond)
	res = invoke(t, api, event(t, "function-url-deny"))
	if res.Err != nil {
		t.Fatalf("function error %v\n%s", res.Err, fn.stdout)
	}
	if got, want := readable(t, res.Payload), goldenResponse(t, "function-url-deny"); !reflect.DeepEqual(got, want) {
		t.Errorf("after the store came back:\n got: %v\nwant: %v\nlogs:\n%s", got, want, fn.stdout)
	}
	// The log reaches the test through a pipe, after the answer.
	for deadline := time.Now().Add(patience); !strings.Contains(fn.stdout.String(), `"message":"policy bundle loaded"`); {
		if time.Now().After(deadline) {
			t.Fatalf("no load logged:\n%s", fn.stdout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
