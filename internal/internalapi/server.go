package internalapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"
)

// Zone is one authoritative zone as a node serves it.
type Zone struct {
	Name   string `json:"name"`
	Serial uint32 `json:"serial"`
}

// NodeStatus answers GET /internal/status.
type NodeStatus struct {
	Node string `json:"node"`
	// SnapshotAgeSeconds is how old the node's view of the store is.
	SnapshotAgeSeconds float64 `json:"snapshotAgeSeconds"`
	Ready              bool    `json:"ready"`
	// Version is the node's build; Serial the generation of the snapshot
	// it serves (0 before the first); Role all, operator or dataplane.
	Version string `json:"version,omitempty"`
	Serial  uint64 `json:"serial,omitempty"`
	Role    string `json:"role,omitempty"`
	// Blocking is the node's blocking toggle (svc edge flushes its cache
	// when it changes); absent where the node does not report it.
	Blocking *bool `json:"blocking,omitempty"`
}

// ZoneSource lists the zones a node serves.
type ZoneSource interface {
	Zones(ctx context.Context) ([]Zone, error)
}

// ListBodies opens cached list bodies by sha256 hex digest
// (*listfetch.Fetcher implements it).
type ListBodies interface {
	Open(digest string) (*os.File, error)
}

// StatusSource reports the node's readiness.
type StatusSource interface {
	Status(ctx context.Context) NodeStatus
}

// Deps are what the handler serves.
type Deps struct {
	Status StatusSource
	Zones  ZoneSource
	Lists  ListBodies
	Logger *slog.Logger
	// Settings takes cluster settings pushed by peers; nil: not served.
	Settings ClusterSettings
	// API serves reads of the node's REST API forwarded by a peer
	// (GET /internal/api/v1/...; forward.go); nil: not served.
	API http.Handler
}

// Handler returns the internal API; every request needs the bearer token.
func Handler(creds *Credentials, deps Deps) http.Handler {
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /internal/status", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, deps.Status.Status(r.Context()))
	})
	mux.HandleFunc("GET /internal/zones", func(w http.ResponseWriter, r *http.Request) {
		zs, err := deps.Zones.Zones(r.Context())
		if err != nil {
			deps.Logger.Warn("internal api: zones", "err", err)
			http.Error(w, "zones unavailable", http.StatusServiceUnavailable)
			return
		}
		writeJSON(w, map[string]any{"zones": zs})
	})
	mux.HandleFunc("GET /internal/lists/{digest}", func(w http.ResponseWriter, r *http.Request) {
		serveList(w, r, deps)
	})
	if deps.API != nil {
		mux.Handle("GET /internal/api/v1/", http.StripPrefix("/internal/api/v1", deps.API))
	}
	if deps.Settings != nil {
		mux.HandleFunc("PUT /internal/settings/cluster", func(w http.ResponseWriter, r *http.Request) {
			serveClusterSettings(w, r, deps)
		})
	}
	want := []byte("Bearer " + creds.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="service-internal"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func validDigest(d string) bool {
	b, err := hex.DecodeString(d)
	return err == nil && len(b) == sha256.Size && hex.EncodeToString(b) == d
}

// serveList sends a cached body after checking it still has its digest.
func serveList(w http.ResponseWriter, r *http.Request, deps Deps) {
	digest := r.PathValue("digest")
	if !validDigest(digest) {
		http.Error(w, "digest must be 64 lower-case hex characters", http.StatusBadRequest)
		return
	}
	f, err := deps.Lists.Open(digest)
	if errors.Is(err, fs.ErrNotExist) {
		http.Error(w, "no such list body", http.StatusNotFound)
		return
	}
	if err != nil {
		deps.Logger.Warn("internal api: open list body", "digest", digest, "err", err)
		http.Error(w, "list body unavailable", http.StatusInternalServerError)
		return
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil || hex.EncodeToString(h.Sum(nil)) != digest {
		deps.Logger.Warn("internal api: cached list body does not match its digest", "digest", digest)
		http.Error(w, "list body corrupt", http.StatusInternalServerError)
		return
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		http.Error(w, "list body unavailable", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("ETag", `"`+digest+`"`)
	http.ServeContent(w, r, "", time.Time{}, f)
}

// Serve runs the TLS listener on ln until ctx ends.
func Serve(ctx context.Context, ln net.Listener, creds *Credentials, deps Deps) error {
	srv := &http.Server{
		Handler:           Handler(creds, deps),
		TLSConfig:         creds.ServerTLS(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		case <-done:
		}
	}()
	defer close(done)
	if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("internal listener: %w", err)
	}
	return nil
}

// Client talks to peers' internal listeners.
type Client struct {
	creds *Credentials
	http  *http.Client
}

// NewClient returns a client trusting the internal CA.
func NewClient(creds *Credentials) *Client {
	tr := &http.Transport{TLSClientConfig: creds.ClientTLS(), ForceAttemptHTTP2: true, IdleConnTimeout: time.Minute}
	return &Client{creds: creds, http: &http.Client{Transport: tr, Timeout: 5 * time.Minute}}
}

func (c *Client) get(ctx context.Context, peer, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+peer+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.creds.Token)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("internal %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("internal %s from %s: %s", path, peer, resp.Status)
	}
	return resp, nil
}

// Status asks peer (host:port) for its status.
func (c *Client) Status(ctx context.Context, peer string) (NodeStatus, error) {
	var st NodeStatus
	resp, err := c.get(ctx, peer, "/internal/status")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	return st, json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&st)
}

// Zones asks peer for its zones.
func (c *Client) Zones(ctx context.Context, peer string) ([]Zone, error) {
	resp, err := c.get(ctx, peer, "/internal/zones")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out struct {
		Zones []Zone `json:"zones"`
	}
	err = json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&out)
	return out.Zones, err
}

// ListBody streams the list body with digest from peer. The caller stores
// it through listfetch.Fetcher.Store, which verifies the digest again.
func (c *Client) ListBody(ctx context.Context, peer, digest string) (io.ReadCloser, error) {
	if !validDigest(digest) {
		return nil, fmt.Errorf("list body: bad digest %q", digest)
	}
	resp, err := c.get(ctx, peer, "/internal/lists/"+digest)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}
