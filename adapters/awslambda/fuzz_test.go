package awslambda

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	jsonv1 "github.com/go-json-experiment/json/v1"
)

// addEvents seeds f with the event fixtures.
func addEvents(f *testing.F) {
	events, _ := filepath.Glob("testdata/*.event.json")
	for _, name := range events {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// FuzzInvoke: any payload is an HTTP response of its trigger's format or
// an EventError; never a panic.
func FuzzInvoke(f *testing.F) {
	h := examplesHandler(f, io.Discard)
	addEvents(f)
	f.Add([]byte(`{"Records":[]}`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		var out []byte
		var err error
		done := make(chan struct{})
		go func() {
			defer close(done)
			out, err = h.Invoke(context.Background(), payload)
		}()
		select {
		case <-done:
		case <-time.After(time.Minute): // a hang, not a slow answer
			t.Fatalf("no answer after a minute")
		}
		if err != nil {
			var ee *EventError
			if out != nil || !errors.As(err, &ee) {
				t.Fatalf("error %v with output %q", err, out)
			}
			return
		}
		var resp struct {
			StatusCode int `json:"statusCode"`
		}
		if err := json.Unmarshal(out, &resp); err != nil || resp.StatusCode < 200 || resp.StatusCode > 599 {
			t.Fatalf("response %s: %v", out, err)
		}
	})
}

// FuzzEventDecode: the event is read with go-json-experiment's v1 package,
// which is encoding/json's semantics on the v2 decoder. On any payload it
// must decode what encoding/json decodes, errors included: the same event
// from names in any case, repeated names, invalid UTF-8 and null; the same
// partial event and the same field, kind and type for a value of the wrong
// type; an error where encoding/json has one.
func FuzzEventDecode(f *testing.F) {
	addEvents(f)
	for _, s := range []string{
		`{"Version":"2.0","BODY":"a","requestcontext":{"HTTP":{"method":"POST"}},"isbase64encoded":true}`,
		`{"body":"a","body":"b","headers":{"a":"1"},"headers":{"b":"2"}}`,
		"{\"body\":\"\xff\xfe\",\"headers\":{\"\xc3\":\"\\ud800\"}}",
		`{"headers":null,"cookies":null,"requestContext":null,"body":null}`,
		`{"version":"2.0","requestContext":{"http":{"method":"POST","sourceIp":1}},"body":"x"}`,
		`{"httpMethod":"POST","headers":{"a":1,"b":"2"},"multiValueHeaders":{"c":["x",2]},"body":{}}`,
		`{"httpMethod":"POST","requestContext":{"identity":"x"},"cookies":[1],"isBase64Encoded":"true"}`,
		`{"headers":{"a":"1"}} trailing`,
		`[]`, `"x"`, `null`, `{"body":"\u00e9\ud83d\ude00"}`, `{"rawPath":1e400}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		var want, got httpEvent
		wantErr := json.Unmarshal(payload, &want)
		gotErr := jsonv1.Unmarshal(payload, &got)
		if (wantErr == nil) != (gotErr == nil) {
			t.Fatalf("encoding/json: %v; v1 package: %v", wantErr, gotErr)
		}
		var wantType *json.UnmarshalTypeError
		if wantErr != nil && !errors.As(wantErr, &wantType) {
			return // not JSON, or not an object: Invoke reads nothing of it
		}
		if wantType != nil {
			var gotType *jsonv1.UnmarshalTypeError
			if !errors.As(gotErr, &gotType) {
				t.Fatalf("encoding/json: %v; v1 package: %v", wantErr, gotErr)
			}
			if fieldPath(gotType.Field) != wantType.Field || gotType.Value != wantType.Value || gotType.Type != wantType.Type {
				t.Fatalf("type error: encoding/json %q %q %v; v1 package %q (%q) %q %v",
					wantType.Field, wantType.Value, wantType.Type, fieldPath(gotType.Field), gotType.Field, gotType.Value, gotType.Type)
			}
		}
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("encoding/json decoded\n%+v\nthe v1 package\n%+v", want, got)
		}
	})
}
