package api

import (
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
)

// NodeParam is the node choice of the query-log and statistics routes
// (docs/dashboard.md, Node selector).
type NodeParam struct {
	Node string `query:"node" maxLength:"253" doc:"answer for this node, a name from GET /nodes: the serving node checks the permission and forwards the request to that node over the internal listener; empty or the serving node's name: this node"`
}

// NodeForwarder sends a read of the API to another node of the cluster.
type NodeForwarder interface {
	// Forward sends GET pathAndQuery (below /api/v1) to the named node,
	// with the headers given, and returns its answer whatever the status.
	// An unknown name is ErrUnknownNode.
	Forward(ctx context.Context, node, pathAndQuery string, header http.Header) (*http.Response, error)
}

// ErrUnknownNode: no node of the cluster has that name.
var ErrUnknownNode = errors.New("no such node")

// nodeRoutes are the operations that take NodeParam.
var nodeRoutes = map[string]bool{
	"queries": true, "queries-blocked": true, "queries-clients": true, "queries-clients-timeseries": true,
	"stats-summary": true, "stats-top": true, "queries-stream": true,
}

// forwardedHeaders reach the other node; nothing that authenticates.
var forwardedHeaders = []string{"Accept", "Last-Event-ID", "X-Request-ID"}

// forwardNode is the huma middleware after authorize: a node-scoped read
// naming another node is answered by that node (the caller's permission
// was checked here; the other node serves it as the node principal).
func (s *Server) forwardNode(ctx huma.Context, next func(huma.Context)) {
	op := ctx.Operation()
	node := ctx.Query("node")
	if node == "" || node == s.opts.NodeName || !nodeRoutes[op.OperationID] {
		next(ctx)
		return
	}
	if node == "all" {
		writeHumaErr(ctx, errInvalid("node=all (every node merged) is not served by this release: name one node of GET /nodes"))
		return
	}
	if s.deps.Forwarder == nil {
		writeHumaErr(ctx, newErr(http.StatusNotFound, KeyNotFound, "node "+node+" is not a peer of "+s.opts.NodeName,
			"GET /nodes lists the nodes this one can reach (SERVICE_INTERNAL_PEERS); on Kubernetes, call the node's own API"))
		return
	}
	u := ctx.URL()
	q := u.Query()
	q.Del("node")
	path := op.Path
	if e := q.Encode(); e != "" {
		path += "?" + e
	}
	hdr := http.Header{}
	for _, h := range forwardedHeaders {
		if v := ctx.Header(h); v != "" {
			hdr.Set(h, v)
		}
	}
	resp, err := s.deps.Forwarder.Forward(ctx.Context(), node, path, hdr)
	if errors.Is(err, ErrUnknownNode) {
		writeHumaErr(ctx, newErr(http.StatusNotFound, KeyNotFound, "node "+node+" is not in GET /nodes", "choose a node that GET /nodes lists"))
		return
	}
	if err != nil {
		writeHumaErr(ctx, newErr(http.StatusServiceUnavailable, KeyUnavailable, "node "+node+" did not answer: "+err.Error(),
			"GET /nodes shows whether it is ready; try again or choose another node"))
		return
	}
	defer resp.Body.Close()
	for _, h := range []string{"Content-Type", "Cache-Control", "Retry-After"} {
		if v := resp.Header.Get(h); v != "" {
			ctx.SetHeader(h, v)
		}
	}
	ctx.SetHeader("X-Service-Node", node)
	ctx.SetStatus(resp.StatusCode)
	// Copied as it comes, flushed per read: the stream (SSE) stays live.
	w := ctx.BodyWriter()
	fl, _ := w.(http.Flusher)
	buf := make([]byte, 32<<10)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if fl != nil {
				fl.Flush()
			}
		}
		if rerr != nil {
			if !errors.Is(rerr, io.EOF) {
				s.log.Warn("forwarded answer cut", "node", node, "path", op.Path, "err", rerr)
			}
			return
		}
	}
}
