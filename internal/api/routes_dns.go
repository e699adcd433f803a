package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/danielgtaylor/huma/v2"
)

func errNotImplemented(what string) *Error {
	return newErr(http.StatusNotImplemented, KeyNotImplemented, what+" is not available on this node", "")
}

type dnsQueryIn struct{ Body DNSQueryRequest }
type dnsQueryOut struct{ Body *DNSQueryResult }
type blockingIn struct{ Body BlockingRequest }
type blockingOut struct{ Body *BlockingState }

type flushIn struct {
	Body struct {
		Name string `json:"name,omitempty" maxLength:"255" doc:"flush only this name; empty flushes everything"`
	}
}

// NodeResult is the outcome of an operation on one node.
type NodeResult struct {
	Node   string  `json:"node"`
	OK     bool    `json:"ok"`
	Error  string  `json:"error,omitempty" doc:"why the operation failed on this node"`
	TookMS float64 `json:"took_ms" doc:"time the node took"`
}

// CacheFlushResult answers POST /cache/flush: one NodeResult per node the
// flush reached (the serving node: each node keeps its own cache).
type CacheFlushResult struct {
	Name   string       `json:"name,omitempty" doc:"the name flushed; empty: the whole cache"`
	Items  []NodeResult `json:"items"`
	TookMS float64      `json:"took_ms"`
}

func (c *CacheFlushResult) setTook(ms float64) { c.TookMS = ms }

type flushOut struct{ Body *CacheFlushResult }

type settingsOut struct{ Body map[string]any }
type schemaOut struct{ Body any }

type mergePatchIn struct {
	RawBody []byte `doc:"JSON merge patch (RFC 7386)"`
}

func (s *Server) registerDNSRoutes() {
	tags := []string{"dns"}
	register(s, huma.Operation{OperationID: "dns-query", Method: http.MethodPost, Path: "/dns/query", Summary: "Resolve a name as a client would", Tags: tags},
		clusterPerm("dns.query"), func(ctx context.Context, in *dnsQueryIn) (*dnsQueryOut, error) {
			// The JSON decoder turned invalid UTF-8 into U+FFFD; a name
			// holding it would be sent upstream mangled.
			for field, v := range map[string]string{"name": in.Body.Name, "client": in.Body.Client} {
				if strings.ContainsRune(v, utf8.RuneError) {
					return nil, errInvalid("%s: invalid UTF-8 (or U+FFFD); names must be UTF-8 encoded", field)
				}
			}
			if s.deps.DNS == nil {
				return nil, errNotImplemented("DNS query")
			}
			res, err := s.deps.DNS.Query(ctx, in.Body)
			if err != nil {
				return nil, fromError(err)
			}
			if res.Node == "" {
				res.Node = s.opts.NodeName
			}
			return &dnsQueryOut{Body: &res}, nil
		})
	register(s, huma.Operation{OperationID: "dns-blocking", Method: http.MethodPost, Path: "/dns/blocking", Summary: "Disable or enable blocking on this node", Tags: tags},
		clusterPerm("dns.blocking"), func(ctx context.Context, in *blockingIn) (*blockingOut, error) {
			if s.deps.DNS == nil {
				return nil, errNotImplemented("blocking toggle")
			}
			auditObject(ctx, "blocking", "", "", s.opts.NodeName, "")
			res, err := s.deps.DNS.SetBlocking(ctx, in.Body)
			if err != nil {
				return nil, fromError(err)
			}
			return &blockingOut{Body: &res}, nil
		})
	register(s, huma.Operation{OperationID: "cache-flush", Method: http.MethodPost, Path: "/cache/flush", Summary: "Flush the cache, or one name", Tags: tags,
		Description: "Flushes the cache of the serving node (each node keeps its own) and answers a NodeResult per node reached."},
		clusterPerm("cache.flush"), func(ctx context.Context, in *flushIn) (*flushOut, error) {
			if s.deps.DNS == nil {
				return nil, errNotImplemented("cache flush")
			}
			auditObject(ctx, "cache-flush", "", "", in.Body.Name, "")
			start := s.clock()
			if err := s.deps.DNS.FlushCache(ctx, in.Body.Name); err != nil {
				return nil, fromError(err)
			}
			took := float64(s.clock().Sub(start).Microseconds()) / 1000
			return &flushOut{Body: &CacheFlushResult{Name: in.Body.Name,
				Items: []NodeResult{{Node: s.opts.NodeName, OK: true, TookMS: took}}}}, nil
		})
}

func (s *Server) registerSettingsRoutes() {
	tags := []string{"settings"}
	register(s, huma.Operation{OperationID: "settings-get", Method: http.MethodGet, Path: "/settings", Summary: "Effective settings", Tags: tags},
		clusterPerm("settings.read"), func(ctx context.Context, _ *emptyIn) (*settingsOut, error) {
			if s.deps.Settings == nil {
				return nil, errNotImplemented("settings")
			}
			m, err := s.deps.Settings.Effective(ctx)
			if err != nil {
				return nil, fromError(err)
			}
			return &settingsOut{Body: m}, nil
		})
	register(s, huma.Operation{OperationID: "settings-schema", Method: http.MethodGet, Path: "/settings/_schema", Summary: "Metadata of every settings key", Tags: tags},
		clusterPerm("settings.read"), func(ctx context.Context, _ *emptyIn) (*schemaOut, error) {
			if s.deps.Settings == nil {
				return nil, errNotImplemented("settings")
			}
			v, err := s.deps.Settings.Schema(ctx)
			if err != nil {
				return nil, fromError(err)
			}
			return &schemaOut{Body: v}, nil
		})
	patch := func(scope string, fn func(SettingsService) func(context.Context, []byte) error) func(context.Context, *mergePatchIn) (*settingsOut, error) {
		return func(ctx context.Context, in *mergePatchIn) (*settingsOut, error) {
			if s.deps.Settings == nil {
				return nil, errNotImplemented("settings")
			}
			var probe map[string]any
			if err := json.Unmarshal(in.RawBody, &probe); err != nil || probe == nil {
				return nil, errInvalid("body: a JSON merge patch object is required")
			}
			auditObject(ctx, "patch-settings", "Settings", "", scope, "")
			if err := fn(s.deps.Settings)(ctx, in.RawBody); err != nil {
				return nil, fromError(err)
			}
			m, err := s.deps.Settings.Effective(ctx)
			if err != nil {
				return nil, fromError(err)
			}
			return &settingsOut{Body: m}, nil
		}
	}
	register(s, huma.Operation{OperationID: "settings-patch", Method: http.MethodPatch, Path: "/settings", Summary: "Merge-patch cluster settings", Tags: tags},
		clusterPerm("settings.write"), patch("cluster", func(ss SettingsService) func(context.Context, []byte) error { return ss.PatchCluster }))
	register(s, huma.Operation{OperationID: "node-config-patch", Method: http.MethodPatch, Path: "/node/config", Summary: "Merge-patch this node's settings", Tags: tags},
		clusterPerm("nodeconfig.write"), patch("node", func(ss SettingsService) func(context.Context, []byte) error { return ss.PatchNode }))
}
