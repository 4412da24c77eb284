// Command runner runs the Cloud Function locally through functions-framework-go,
// as Cloud Functions serves it: the function at "/" (every path), on PORT.
//
//	PORT             listen port (default 8080)
//	LOCAL_ONLY=true  listen on 127.0.0.1 only, not on every interface
//	FUNCTION_TARGET  the function to serve (default Admitfn)
//
// --version prints which admitfn it is and exits.
package main

import (
	"fmt"
	"os"

	"github.com/GoogleCloudPlatform/functions-framework-go/funcframework"

	"github.com/admitfn/admitfn/functions/gcf"
	_ "github.com/admitfn/admitfn/functions/gcf/runner/internal/versionflag" // before gcf's init
)

func main() {
	if os.Getenv("FUNCTION_TARGET") == "" {
		os.Setenv("FUNCTION_TARGET", gcf.EntryPoint)
	}
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	host := ""
	if os.Getenv("LOCAL_ONLY") == "true" {
		host = "127.0.0.1"
	}
	fmt.Fprintf(os.Stderr, "serving %s on %s:%s\n", os.Getenv("FUNCTION_TARGET"), host, port)
	if err := funcframework.StartHostPort(host, port); err != nil {
		fmt.Fprintln(os.Stderr, "admitfn:", err)
		os.Exit(1)
	}
}
