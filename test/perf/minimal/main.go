// Command minimal is the baseline of the cold start (P4) and throughput (P5)
// measures: the least a Go HTTP server does to answer an AdmissionReview,
// reading each request's body and writing one fixed answer. It takes the
// admitfn server's -addr flag and logs the same "serving" line, so the
// same harness drives both; the other flags are accepted and ignored. Built
// with -tags admitfn_upstream it also links the Kubernetes and cel-go
// packages admitfn's core imports (upstream.go): the floor those packages
// set for P4 and P6.
package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
)

const answer = `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"705ab4f5-6393-11e8-b7cc-42010a800002","allowed":true}}`

// handler answers every request; built with -tags admitfn_handler it is
// admitfn's own review handler (handler.go).
var handler = func(policies string) (http.Handler, error) {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, answer)
	}), nil
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	policies := flag.String("policies", "", "ignored, but by the handler floor (handler.go)")
	flag.String("refresh-interval", "", "ignored")
	flag.Parse()
	h, err := handler(*policies)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "{\"message\":\"serving\",\"addr\":%q}\n", ln.Addr().String())
	err = http.Serve(ln, h)
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
