// Package lambdatest runs Lambda functions in tests the way Lambda does: a
// Runtime API (the documented HTTP interface a bootstrap polls for
// invocations) and a Function URL front that turns HTTP requests into
// payload 2.0 events. Test scaffolding only; nothing in a deployed function
// imports it.
package lambdatest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// MaxPayloadBytes is the limit Lambda puts on a synchronous invocation's
// response: a larger response is refused with 413.
const MaxPayloadBytes = 6_291_556

const prefix = "/2018-06-01/runtime/"

// FunctionError is what a function reported instead of a response, for an
// invocation or at init.
type FunctionError struct {
	Type    string // the Lambda-Runtime-Function-Error-Type header
	Message string `json:"errorMessage"`
	Kind    string `json:"errorType"` // errorType in the body
}

func (e *FunctionError) Error() string { return fmt.Sprintf("%s: %s (%s)", e.Kind, e.Message, e.Type) }

// Result is the outcome of one invocation: a response payload or an error.
type Result struct {
	RequestID string
	Payload   []byte
	Err       *FunctionError
}

type invocation struct {
	id       string
	payload  []byte
	deadline time.Time
	traceID  string
	done     chan Result
}

// RuntimeAPI serves the Lambda Runtime API on 127.0.0.1: next invocation,
// invocation response, invocation error and init error. Any number of
// bootstrap processes may poll it, like instances of one function.
type RuntimeAPI struct {
	Addr string // host:port, the value of AWS_LAMBDA_RUNTIME_API

	srv     *http.Server
	queue   chan *invocation
	initErr chan *FunctionError

	mu      sync.Mutex
	pending map[string]*invocation
	seq     int
	closed  chan struct{}
}

// NewRuntimeAPI starts a Runtime API; Close stops it.
func NewRuntimeAPI() (*RuntimeAPI, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &RuntimeAPI{
		Addr:    ln.Addr().String(),
		queue:   make(chan *invocation),
		initErr: make(chan *FunctionError, 16),
		pending: map[string]*invocation{},
		closed:  make(chan struct{}),
	}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go r.srv.Serve(ln)
	return r, nil
}

// Close stops the API; bootstraps polling it see their connection fail.
func (r *RuntimeAPI) Close() {
	close(r.closed)
	r.srv.Close()
}

// InitErrors delivers the init errors functions report.
func (r *RuntimeAPI) InitErrors() <-chan *FunctionError { return r.initErr }

// Invoke queues payload for the next bootstrap that asks, with the function
// timeout, and waits for its response or error (or ctx).
func (r *RuntimeAPI) Invoke(ctx context.Context, payload []byte, timeout time.Duration) (Result, error) {
	r.mu.Lock()
	r.seq++
	inv := &invocation{
		id:       fmt.Sprintf("8f5e2b4a-0000-4000-8000-%012d", r.seq),
		payload:  payload,
		traceID:  fmt.Sprintf("Root=1-67400000-%024d;Sampled=0", r.seq),
		done:     make(chan Result, 1),
		deadline: time.Now().Add(timeout),
	}
	r.mu.Unlock()
	select {
	case r.queue <- inv:
	case <-ctx.Done():
		return Result{}, ctx.Err()
	case <-r.closed:
		return Result{}, errors.New("runtime API closed")
	}
	select {
	case res := <-inv.done:
		return res, nil
	case <-ctx.Done():
		return Result{}, ctx.Err()
	case <-r.closed:
		return Result{}, errors.New("runtime API closed")
	}
}

func (r *RuntimeAPI) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	path, ok := strings.CutPrefix(req.URL.Path, prefix)
	switch {
	case !ok:
		http.NotFound(w, req)
	case path == "invocation/next" && req.Method == http.MethodGet:
		r.next(w, req)
	case path == "init/error" && req.Method == http.MethodPost:
		fe, err := readError(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.initErr <- fe
		accepted(w)
	case strings.HasPrefix(path, "invocation/") && req.Method == http.MethodPost:
		id, what, _ := strings.Cut(strings.TrimPrefix(path, "invocation/"), "/")
		r.finish(w, req, id, what)
	default:
		http.NotFound(w, req)
	}
}

func (r *RuntimeAPI) next(w http.ResponseWriter, req *http.Request) {
	var inv *invocation
	select {
	case inv = <-r.queue:
	case <-req.Context().Done():
		return
	case <-r.closed:
		return
	}
	r.mu.Lock()
	r.pending[inv.id] = inv
	r.mu.Unlock()
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Lambda-Runtime-Aws-Request-Id", inv.id)
	h.Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(inv.deadline.UnixMilli(), 10))
	h.Set("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:eu-west-1:123456789012:function:admitfn")
	h.Set("Lambda-Runtime-Trace-Id", inv.traceID)
	w.Write(inv.payload)
}

func (r *RuntimeAPI) finish(w http.ResponseWriter, req *http.Request, id, what string) {
	r.mu.Lock()
	inv, ok := r.pending[id]
	if ok && (what == "response" || what == "error") {
		delete(r.pending, id)
	}
	r.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusBadRequest, map[string]string{"errorMessage": "Invalid request ID", "errorType": "InvalidRequestID"})
		return
	}
	switch what {
	case "response":
		body, err := io.ReadAll(io.LimitReader(req.Body, MaxPayloadBytes+1))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if len(body) > MaxPayloadBytes {
			writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"errorMessage": "Exceeded maximum allowed payload size (6291556 bytes).", "errorType": "RequestEntityTooLarge"})
			inv.done <- Result{RequestID: id, Err: &FunctionError{Type: "Function.ResponseSizeTooLarge", Kind: "Function.ResponseSizeTooLarge", Message: "Response payload size exceeded maximum allowed payload size (6291556 bytes)."}}
			return
		}
		inv.done <- Result{RequestID: id, Payload: body}
	case "error":
		fe, err := readError(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		inv.done <- Result{RequestID: id, Err: fe}
	default:
		http.NotFound(w, req)
		return
	}
	accepted(w)
}

func readError(req *http.Request) (*FunctionError, error) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	fe := &FunctionError{Type: req.Header.Get("Lambda-Runtime-Function-Error-Type")}
	if len(bytes.TrimSpace(body)) > 0 {
		if err := json.Unmarshal(body, fe); err != nil {
			return nil, fmt.Errorf("error body is not JSON: %v", err)
		}
	}
	return fe, nil
}

func accepted(w http.ResponseWriter) {
	writeJSON(w, http.StatusAccepted, map[string]string{"status": "OK"})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}
