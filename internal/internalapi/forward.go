package internalapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"
)

// Forward sends GET of a REST API path (below /api/v1, with its query) to
// peer's internal listener, which serves it with the node's own API as the
// node principal: how one node answers a dashboard's node= choice for
// another. The answer is returned whatever its status; the caller closes
// its body.
func (c *Client) Forward(ctx context.Context, peer, pathAndQuery string, header http.Header) (*http.Response, error) {
	if !strings.HasPrefix(pathAndQuery, "/") {
		return nil, fmt.Errorf("forward: path %q must start with /", pathAndQuery)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+peer+"/internal/api/v1"+pathAndQuery, nil)
	if err != nil {
		return nil, err
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	req.Header.Set("Authorization", "Bearer "+c.creds.Token)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("forward to %s: %w", peer, err)
	}
	return resp, nil
}
