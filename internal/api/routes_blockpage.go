package api

import (
	"context"
	"errors"
	"io/fs"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/svcdns/svc/internal/blockpage"
)

type blockPageCAOut struct {
	ContentType string `header:"Content-Type"`
	Disposition string `header:"Content-Disposition"`
	Body        []byte
}

// registerBlockPageRoutes serves the block page's generated CA, which
// devices trust to see the page over HTTPS without a warning (the page
// serves it too, at /_blockpage/ca.crt). It is public: a CA certificate is
// no secret, and devices fetch it before anyone logs in.
func (s *Server) registerBlockPageRoutes() {
	register(s, huma.Operation{OperationID: "blockpage-ca", Method: http.MethodGet, Path: "/blockpage/ca.crt",
		Summary: "The block page's generated CA certificate (PEM)", Tags: []string{"blockpage"},
		Description: "Generated in `<dataDir>/blockpage` when the block page's HTTPS listener has no certificate " +
			"(listeners.blockPage.tls.certFile); 404 when this node has none. See docs/blockpage.md.",
		Errors: []int{http.StatusNotFound},
		Responses: map[string]*huma.Response{"200": {Description: "PEM certificate", Content: map[string]*huma.MediaType{
			"application/x-pem-file": {Schema: &huma.Schema{Type: "string"}}}}}},
		public(), func(context.Context, *emptyIn) (*blockPageCAOut, error) {
			pem, err := blockpage.ReadCACert(blockpage.StateDir(s.opts.DataDir))
			if errors.Is(err, fs.ErrNotExist) {
				return nil, errNotFound("block page CA (this node generated none: its block page has no HTTPS listener, or one with listeners.blockPage.tls.certFile)")
			}
			if err != nil {
				return nil, fromError(err)
			}
			return &blockPageCAOut{ContentType: "application/x-pem-file", Disposition: `attachment; filename="service-blockpage-ca.crt"`, Body: pem}, nil
		})
}
