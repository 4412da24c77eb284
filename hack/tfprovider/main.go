// Command tfprovider is a Terraform provider that serves one recorded
// schema (`terraform providers schema -json`, gzipped, in schema.json.gz
// beside the executable) over the plugin protocol, version 6. make
// tf-check installs it in a filesystem mirror under each provider's name
// and version, so that init, validate and test with mock_provider run
// offline against the real providers' argument names, types, required,
// optional and computed attributes and block nesting.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6/tf6server"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "tfprovider:", err)
		os.Exit(1)
	}
}

func run() error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	f, err := os.Open(filepath.Join(filepath.Dir(exe), "schema.json.gz"))
	if err != nil {
		return err
	}
	schema, err := load(f)
	f.Close()
	if err != nil {
		return err
	}
	return tf6server.Serve(schema.address, func() tfprotov6.ProviderServer { return &server{schema: schema} })
}
