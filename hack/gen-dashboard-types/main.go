// Command gen-dashboard-types writes web/static/api.gen.js (JSDoc types and
// the route table of the REST API) from openapi/openapi.json, and with
// -vendor copies the pinned Preact + htm build from web/node_modules (after
// `npm ci` in web/) into web/static/vendor. Run from the repository root,
// or through `go generate ./internal/dashboard`.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/svcdns/svc/internal/dashboard/apigen"
)

func main() {
	in := flag.String("openapi", "openapi/openapi.json", "OpenAPI document")
	out := flag.String("out", "web/static/api.gen.js", "module to write")
	vendor := flag.Bool("vendor", false, "also copy web/node_modules/htm/preact/standalone.module.js into web/static/vendor/preact-htm.js")
	flag.Parse()
	if err := run(*in, *out, *vendor); err != nil {
		fmt.Fprintln(os.Stderr, "gen-dashboard-types:", err)
		os.Exit(1)
	}
}

func run(in, out string, vendor bool) error {
	doc, err := os.ReadFile(in)
	if err != nil {
		return fmt.Errorf("%w (run from the repository root)", err)
	}
	b, err := apigen.Generate(doc)
	if err != nil {
		return err
	}
	if err := os.WriteFile(out, b, 0o644); err != nil {
		return err
	}
	if !vendor {
		return nil
	}
	src, err := os.ReadFile(apigen.VendorSource)
	if err != nil {
		return fmt.Errorf("%w (run npm ci in web/ first)", err)
	}
	return os.WriteFile(apigen.VendorTarget, append([]byte(apigen.VendorHeader), src...), 0o644)
}
