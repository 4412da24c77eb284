package gcf

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/GoogleCloudPlatform/functions-framework-go/funcframework"
	"github.com/rs/zerolog"

	"github.com/admitfn/admitfn/adapters/httpadapter"
	"github.com/admitfn/admitfn/core/celeval"
	"github.com/admitfn/admitfn/core/engine"
	"github.com/admitfn/admitfn/test/syncbuf"
)

// TestThroughTheFramework serves the examples through functions-framework-go's
// own server, on 127.0.0.1, with the function registered at "/".
func TestThroughTheFramework(t *testing.T) {
	eng, _, err := engine.Load(os.DirFS("../../policies/examples"), ".", celeval.NewCompiler())
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncbuf.Buffer{}
	log := zerolog.New(logs)
	// A body that stops arriving ends after BodyIdle (below): the
	// framework's server passes read deadlines through.
	h := New(httpadapter.New(eng, log, httpadapter.WithLimits(httpadapter.Limits{BodyIdle: 300 * time.Millisecond})), log, "demo-project")
	if err := funcframework.RegisterHTTPFunctionContext(context.Background(), "/", h.ServeHTTP); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	go funcframework.StartHostPort("127.0.0.1", port) // serves until the test binary exits

	request, err := os.ReadFile("../httpadapter/testdata/warn.request.json")
	if err != nil {
		t.Fatal(err)
	}
	golden, err := os.ReadFile("../httpadapter/testdata/warn.response.json")
	if err != nil {
		t.Fatal(err)
	}
	var resp *http.Response
	// Until the framework listens; two minutes is a safety net.
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		req, _ := http.NewRequest("POST", "http://127.0.0.1:"+port+"/validate?timeout=10s", bytes.NewReader(request))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Cloud-Trace-Context", "0123456789abcdef0123456789abcdef/42;o=1")
		req.Header.Set("Function-Execution-Id", "exec-1")
		if resp, err = http.DefaultClient.Do(req); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var got, want any
	json.Unmarshal(body, &got)
	json.Unmarshal(golden, &want)
	if resp.StatusCode != 200 || !reflect.DeepEqual(got, want) {
		t.Errorf("HTTP %d %s", resp.StatusCode, body)
	}

	c, err := net.Dial("tcp", "127.0.0.1:"+port)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "POST /validate?timeout=10s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
	c.SetReadDeadline(time.Now().Add(2 * time.Minute))
	stalled, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(stalled.Body)
	const idle = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"request body stopped arriving: no byte for 300ms","reason":"Timeout","code":408}`
	if stalled.StatusCode != http.StatusRequestTimeout || string(body) != idle {
		t.Errorf("a stalled body through the framework: %d %s", stalled.StatusCode, body)
	}

	var line map[string]any
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, `"message":"review"`) {
			json.Unmarshal([]byte(l), &line)
		}
	}
	labels, _ := line[LabelsField].(map[string]any)
	if line[TraceField] != "projects/demo-project/traces/0123456789abcdef0123456789abcdef" || line[SpanField] != "42" || labels["execution_id"] != "exec-1" {
		t.Errorf("review log line: %v", line)
	}
}

func TestWithoutProjectOrTrace(t *testing.T) {
	var logs bytes.Buffer
	log := zerolog.New(&logs)
	h := New(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		zerolog.Ctx(r.Context()).Info().Msg("inside")
	}), log, "")
	req, _ := http.NewRequest("GET", "/", nil)
	h.ServeHTTP(discard{}, req)
	if got := strings.TrimSpace(logs.String()); got != `{"level":"info","message":"inside"}` {
		t.Errorf("log line %s", got)
	}
}

type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) Write(p []byte) (int, error) { return len(p), nil }
func (discard) WriteHeader(int)             {}
