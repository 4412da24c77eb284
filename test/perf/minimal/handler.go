//go:build admitfn_handler

package main

import (
	"net/http"
	"os"

	"github.com/rs/zerolog"

	"github.com/admitfn/admitfn/adapters/httpadapter"
	"github.com/admitfn/admitfn/core/celeval"
	"github.com/admitfn/admitfn/core/engine"
)

// Built with -tags admitfn_handler, the minimal server answers with
// admitfn's review handler over the bundle it is given, and nothing the
// server adds around it: no log line, metrics, limits or connection
// accounting (the path tokens the harness sends are checked, as the server
// checks them). The floor of P5 for any server that answers with admitfn's
// reviews.
func init() {
	handler = func(policies string) (http.Handler, error) {
		eng, _, err := engine.Load(os.DirFS(policies), ".", celeval.NewCompiler())
		if err != nil {
			return nil, err
		}
		tokens, err := httpadapter.ParseTokens(os.Getenv("ADMITFN_TOKENS"))
		if err != nil {
			return nil, err
		}
		return httpadapter.New(eng, zerolog.Nop(), httpadapter.WithPathTokens(tokens...)), nil
	}
}
