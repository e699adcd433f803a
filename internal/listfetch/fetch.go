// Package listfetch downloads block-list bodies for the BlockList
// reconciler: conditional GET, bodies cached by sha256 in the lists
// directory (reused across restarts), size and time limits on every body,
// and a URL safety check on the address actually dialled.
package listfetch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Defaults of Options.
const (
	DefaultMaxBodyBytes = 64 << 20
	DefaultTimeout      = 2 * time.Minute
	DefaultMaxParses    = 4 // spec Limits: at most 4 concurrent parses per node
	maxRedirects        = 5
	indexFile           = "index.json"
)

// Errors callers may test for.
var (
	ErrForbiddenAddress = errors.New("list URL resolves to a refused address (loopback, link-local, unspecified or multicast)")
	ErrTooLarge         = errors.New("list body exceeds the size limit")
	ErrScheme           = errors.New("list URL scheme must be http or https")
)

// Options configure a Fetcher.
type Options struct {
	// Dir is blocking.listsDir; bodies are stored as Dir/<sha256 hex>.
	Dir string
	// AllowLocal is blocking.allowLocalListURLs.
	AllowLocal bool
	// MaxBodyBytes caps every body (default 64 MiB).
	MaxBodyBytes int64
	// Timeout caps the whole request including the body (default 2m).
	Timeout time.Duration
	// MaxParses bounds concurrent parses (default 4).
	MaxParses int
	// UserAgent of requests.
	UserAgent string
	Logger    *slog.Logger

	// refuse replaces the address check in tests (which may only use
	// loopback addresses).
	refuse func(netip.Addr) bool
}

// Result of a fetch.
type Result struct {
	URL          string
	Path         string // cached body on disk
	Digest       string // sha256 hex of the body
	Size         int64
	ETag         string
	LastModified string
	FetchedAt    time.Time // last successful contact (200 or 304)
	// NotModified: the server answered 304 and the cached body was reused.
	NotModified bool
	// Degraded: the fetch failed and this is the cached body of an earlier
	// fetch (the error is returned alongside); blocking.allowDegraded
	// decides whether the caller uses it.
	Degraded bool
}

// Due reports whether a refresh is due after interval.
func (r Result) Due(interval time.Duration, now time.Time) bool {
	return r.FetchedAt.IsZero() || now.Sub(r.FetchedAt) >= interval
}

type indexEntry struct {
	Digest       string    `json:"digest"`
	Size         int64     `json:"size"`
	ETag         string    `json:"etag,omitempty"`
	LastModified string    `json:"lastModified,omitempty"`
	FetchedAt    time.Time `json:"fetchedAt"`
}

// Fetcher fetches and caches list bodies. Safe for concurrent use.
type Fetcher struct {
	opts   Options
	client *http.Client
	log    *slog.Logger
	parses chan struct{}

	mu    sync.Mutex
	index map[string]indexEntry // url -> last good fetch
}

// New creates the lists directory if needed and loads its index.
func New(opts Options) (*Fetcher, error) {
	if opts.Dir == "" {
		return nil, errors.New("listfetch: lists directory is required")
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxParses <= 0 {
		opts.MaxParses = DefaultMaxParses
	}
	if opts.UserAgent == "" {
		opts.UserAgent = "svc-listfetch"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(opts.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("listfetch: create lists dir: %w", err)
	}
	f := &Fetcher{opts: opts, log: opts.Logger, parses: make(chan struct{}, opts.MaxParses),
		index: map[string]indexEntry{}}
	if err := f.loadIndex(); err != nil {
		// A damaged index only costs a full refetch.
		f.log.Warn("list index unreadable, starting empty", "err", err)
	}
	f.client = f.newClient()
	return f, nil
}

func (f *Fetcher) newClient() *http.Client {
	dialer := &net.Dialer{Timeout: 30 * time.Second, ControlContext: f.checkDial}
	tr := &http.Transport{
		// No proxy: a proxy would dial on our behalf and bypass the check.
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		TLSHandshakeTimeout:   30 * time.Second,
		ResponseHeaderTimeout: time.Minute,
		MaxIdleConns:          8,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	return &http.Client{
		Transport: tr,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= maxRedirects {
				return fmt.Errorf("stopped after %d redirects", maxRedirects)
			}
			if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
				return fmt.Errorf("redirect to %s: %w", req.URL.Redacted(), ErrScheme)
			}
			return nil
		},
	}
}

// checkDial runs on the address actually dialled, after DNS resolution, for
// every connection including redirects: this also defeats DNS rebinding.
func (f *Fetcher) checkDial(_ context.Context, network, address string, _ syscall.RawConn) error {
	if f.opts.AllowLocal {
		return nil
	}
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("dial %s: %w", address, err)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("dial %s: %w", address, err)
	}
	check := refused
	if f.opts.refuse != nil {
		check = f.opts.refuse
	}
	if check(ip) {
		return fmt.Errorf("dial %s %s: %w", network, address, ErrForbiddenAddress)
	}
	return nil
}

// refused: loopback, link-local, unspecified and multicast; private LAN
// addresses are allowed (lists are often served from the LAN).
func refused(ip netip.Addr) bool {
	ip = ip.Unmap()
	return ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsUnspecified() || ip.IsMulticast() || ip.IsInterfaceLocalMulticast()
}

// Cached returns the last good fetch of rawURL, if its body is still on disk.
func (f *Fetcher) Cached(rawURL string) (Result, bool) {
	f.mu.Lock()
	e, ok := f.index[rawURL]
	f.mu.Unlock()
	if !ok {
		return Result{}, false
	}
	p := f.bodyPath(e.Digest)
	if _, err := os.Stat(p); err != nil {
		return Result{}, false
	}
	return e.result(rawURL, p), true
}

func (e indexEntry) result(u, p string) Result {
	return Result{URL: u, Path: p, Digest: e.Digest, Size: e.Size, ETag: e.ETag,
		LastModified: e.LastModified, FetchedAt: e.FetchedAt}
}

// Fetch downloads rawURL with a conditional GET against the cached copy. On
// failure with a cached body, it returns that body with Degraded set and the
// error.
func (f *Fetcher) Fetch(ctx context.Context, rawURL string) (Result, error) {
	res, err := f.fetch(ctx, rawURL)
	if err != nil {
		err = fmt.Errorf("fetch %s: %w", redact(rawURL), err)
		if c, ok := f.Cached(rawURL); ok {
			c.Degraded = true
			return c, err
		}
		return Result{URL: rawURL}, err
	}
	return res, nil
}

func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "<invalid URL>"
	}
	return u.Redacted()
}

func (f *Fetcher) fetch(ctx context.Context, rawURL string) (Result, error) {
	// tests (refuse set) serve from loopback; the dial check still applies
	if err := CheckURL(rawURL, f.opts.AllowLocal || f.opts.refuse != nil); err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, f.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return Result{}, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("User-Agent", f.opts.UserAgent)
	cached, haveCache := f.Cached(rawURL)
	if haveCache {
		if cached.ETag != "" {
			req.Header.Set("If-None-Match", cached.ETag)
		}
		if cached.LastModified != "" {
			req.Header.Set("If-Modified-Since", cached.LastModified)
		}
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return Result{}, err
	}
	defer resp.Body.Close()
	now := time.Now().UTC()
	switch {
	case resp.StatusCode == http.StatusNotModified && haveCache:
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		e := indexEntry{Digest: cached.Digest, Size: cached.Size, ETag: cached.ETag,
			LastModified: cached.LastModified, FetchedAt: now}
		if v := resp.Header.Get("ETag"); v != "" {
			e.ETag = v
		}
		if err := f.record(rawURL, e); err != nil {
			return Result{}, err
		}
		r := e.result(rawURL, cached.Path)
		r.NotModified = true
		return r, nil
	case resp.StatusCode != http.StatusOK:
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return Result{}, fmt.Errorf("unexpected status %s", resp.Status)
	}
	if resp.ContentLength > f.opts.MaxBodyBytes {
		return Result{}, fmt.Errorf("%w (Content-Length %d, limit %d)", ErrTooLarge, resp.ContentLength, f.opts.MaxBodyBytes)
	}
	digest, size, err := f.store(resp.Body)
	if err != nil {
		return Result{}, err
	}
	e := indexEntry{Digest: digest, Size: size, ETag: resp.Header.Get("ETag"),
		LastModified: resp.Header.Get("Last-Modified"), FetchedAt: now}
	if err := f.record(rawURL, e); err != nil {
		return Result{}, err
	}
	return e.result(rawURL, f.bodyPath(digest)), nil
}

// Store writes a body received from elsewhere (a follower copying from the
// leader) into the cache and verifies it has the expected digest.
func (f *Fetcher) Store(ctx context.Context, r io.Reader, wantDigest string) (string, error) {
	if _, err := hex.DecodeString(wantDigest); err != nil || len(wantDigest) != 64 {
		return "", fmt.Errorf("store body: bad digest %q", wantDigest)
	}
	if _, err := os.Stat(f.bodyPath(wantDigest)); err == nil {
		return f.bodyPath(wantDigest), nil
	}
	digest, _, err := f.store(ctxReader{ctx, r})
	if err != nil {
		return "", err
	}
	if digest != wantDigest {
		_ = f.remove(digest)
		return "", fmt.Errorf("store body: digest %s, want %s", digest, wantDigest)
	}
	return f.bodyPath(digest), nil
}

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// store streams a body into a temp file while hashing, with the size limit,
// then renames it to its digest.
func (f *Fetcher) store(body io.Reader) (string, int64, error) {
	tmp, err := os.CreateTemp(f.opts.Dir, ".body-*")
	if err != nil {
		return "", 0, fmt.Errorf("create temp body: %w", err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(body, f.opts.MaxBodyBytes+1))
	if err == nil && n > f.opts.MaxBodyBytes {
		err = fmt.Errorf("%w (limit %d bytes)", ErrTooLarge, f.opts.MaxBodyBytes)
	}
	if err != nil {
		_ = tmp.Close()
		return "", 0, fmt.Errorf("read body: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return "", 0, fmt.Errorf("sync body: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", 0, fmt.Errorf("close body: %w", err)
	}
	digest := hex.EncodeToString(h.Sum(nil))
	if err := os.Rename(tmp.Name(), f.bodyPath(digest)); err != nil {
		return "", 0, fmt.Errorf("store body: %w", err)
	}
	return digest, n, nil
}

func (f *Fetcher) bodyPath(digest string) string { return filepath.Join(f.opts.Dir, digest) }

func (f *Fetcher) remove(digest string) error { return os.Remove(f.bodyPath(digest)) }

// Open opens a cached body by digest (for parsing, and for followers copying
// bodies from the leader).
func (f *Fetcher) Open(digest string) (*os.File, error) {
	if _, err := hex.DecodeString(digest); err != nil || len(digest) != 64 {
		return nil, fmt.Errorf("open body: bad digest %q", digest)
	}
	fh, err := os.Open(f.bodyPath(digest))
	if err != nil {
		return nil, fmt.Errorf("open body: %w", err)
	}
	return fh, nil
}

// Prune deletes cached bodies whose digest is not in keep.
func (f *Fetcher) Prune(keep map[string]bool) error {
	ents, err := os.ReadDir(f.opts.Dir)
	if err != nil {
		return fmt.Errorf("prune lists dir: %w", err)
	}
	f.mu.Lock()
	for _, e := range f.index {
		keep[e.Digest] = true
	}
	f.mu.Unlock()
	for _, e := range ents {
		n := e.Name()
		if len(n) == 64 && !keep[n] {
			if _, err := hex.DecodeString(n); err == nil {
				if err := f.remove(n); err != nil {
					return fmt.Errorf("prune %s: %w", n, err)
				}
			}
		}
	}
	return nil
}

// Forget drops rawURL from the index (its source was deleted).
func (f *Fetcher) Forget(rawURL string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.index, rawURL)
	return f.saveIndexLocked()
}

// AcquireParse waits for one of the parse slots (spec: at most 4 concurrent
// parses per node) and returns its release function.
func (f *Fetcher) AcquireParse(ctx context.Context) (func(), error) {
	select {
	case f.parses <- struct{}{}:
		return func() { <-f.parses }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for parse slot: %w", ctx.Err())
	}
}

func (f *Fetcher) record(u string, e indexEntry) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.index[u] = e
	return f.saveIndexLocked()
}

func (f *Fetcher) loadIndex() error {
	b, err := os.ReadFile(filepath.Join(f.opts.Dir, indexFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read index: %w", err)
	}
	idx := map[string]indexEntry{}
	if err := json.Unmarshal(b, &idx); err != nil {
		return fmt.Errorf("decode index: %w", err)
	}
	f.index = idx
	return nil
}

// saveIndexLocked writes the index atomically (temp file and rename).
func (f *Fetcher) saveIndexLocked() error {
	b, err := json.MarshalIndent(f.index, "", "  ")
	if err != nil {
		return fmt.Errorf("encode index: %w", err)
	}
	tmp, err := os.CreateTemp(f.opts.Dir, ".index-*")
	if err != nil {
		return fmt.Errorf("write index: %w", err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(b); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write index: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("sync index: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close index: %w", err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(f.opts.Dir, indexFile)); err != nil {
		return fmt.Errorf("replace index: %w", err)
	}
	return nil
}

// Client is the HTTP client with the fetcher's address checks, for other
// downloads that must obey blocking.allowLocalListURLs (the catalogue).
func (f *Fetcher) Client() *http.Client { return f.client }
