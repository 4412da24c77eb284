package awslambda

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"testing"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/admitfn/admitfn/test/soak"
)

// BenchmarkGoldenEvents: the example bundle's golden reviews served by the
// HTTP handler alone (handler), then each inside a Function URL event
// through aws-lambda-go's invoke path (invoke). invoke ÷ handler is what the
// Lambda transport adds to a warm invocation: reading the event, building
// the request, encoding the event response.
func BenchmarkGoldenEvents(b *testing.B) {
	lambdaHandler := examplesHandler(b, io.Discard)
	cases, err := soak.ExampleCases("../httpadapter/testdata", "../../policies/examples")
	if err != nil {
		b.Fatal(err)
	}
	tmpl, err := os.ReadFile("testdata/function-url-deny.event.json")
	if err != nil {
		b.Fatal(err)
	}
	payloads := make([][]byte, len(cases))
	for i, c := range cases {
		var ev map[string]any
		if err := json.Unmarshal(tmpl, &ev); err != nil {
			b.Fatal(err)
		}
		ev["rawPath"], ev["body"] = c.Route, string(c.Body)
		ev["requestContext"].(map[string]any)["http"].(map[string]any)["path"] = c.Route
		if payloads[i], err = json.Marshal(ev); err != nil {
			b.Fatal(err)
		}
	}
	hh := lambdaHandler.http
	b.Run("handler", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			c := cases[i%len(cases)]
			i++
			if code, body := c.ServeIn(hh); code != http.StatusOK {
				b.Fatalf("%s: HTTP %d: %s", c.Name, code, body)
			}
		}
	})
	lh := lambda.NewHandler(lambdaHandler)
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "bench"})
	b.Run("invoke", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			c, p := cases[i%len(cases)], payloads[i%len(payloads)]
			i++
			out, err := lh.Invoke(ctx, p)
			if err != nil || !bytes.HasPrefix(out, []byte(`{"statusCode":200,`)) {
				b.Fatalf("%s: %v %.100s", c.Name, err, out)
			}
		}
	})
}
