package cli

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/svcdns/svc/internal/api"
)

// APIError is an error answer of the server: {error:{key,message,hint},took_ms}.
type APIError struct {
	Status  int
	Key     string
	Message string
	Hint    string
	Missing string
	Objects []api.ApplyResult
	// Server is where the request went (for the login hint of a 401).
	Server string
}

func (e *APIError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	if e.Key != "" {
		return fmt.Sprintf("%s (%s, HTTP %d)", msg, e.Key, e.Status)
	}
	return fmt.Sprintf("%s (HTTP %d)", msg, e.Status)
}

// decodeAPIError reads an error body; bodies of another shape keep their text.
func decodeAPIError(status int, body []byte, server string) *APIError {
	var eb api.Error
	e := &APIError{Status: status, Server: server}
	if err := json.Unmarshal(body, &eb); err == nil && eb.Detail.Key != "" {
		e.Key, e.Message, e.Hint, e.Missing, e.Objects = eb.Detail.Key, eb.Detail.Message, eb.Detail.Hint, eb.Detail.Missing, eb.Detail.Objects
		return e
	}
	e.Message = strings.TrimSpace(string(body))
	if len(e.Message) > 500 {
		e.Message = e.Message[:500] + "..."
	}
	return e
}

// Client calls the REST API of one server.
type Client struct {
	Server string // as configured, e.g. https://127.0.0.1:8080
	Base   string // Server plus /api/v1
	Token  string
	HTTP   *http.Client
	// Warnings, when set, receives the Warning headers of successful
	// answers (notes on an accepted write) as "Warning: text" lines.
	Warnings io.Writer
}

// TLSOptions configure certificate checks of a client.
type TLSOptions struct {
	CAFile   string
	Insecure bool
}

func newHTTPClient(opts TLSOptions, timeout time.Duration) (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if opts.CAFile != "" {
		pem, err := os.ReadFile(expandHome(opts.CAFile))
		if err != nil {
			return nil, fmt.Errorf("ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca-file %s: no PEM certificate found", opts.CAFile)
		}
		cfg.RootCAs = pool
	}
	cfg.InsecureSkipVerify = opts.Insecure //nolint:gosec // asked for by --insecure-skip-tls-verify
	tr.TLSClientConfig = cfg
	return &http.Client{Transport: tr, Timeout: timeout}, nil
}

// normalizeServer adds a scheme and strips a trailing slash or /api/v1.
func normalizeServer(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", errors.New("no server: pass --server, set SERVICE_SERVER or log in with `svc login --server URL`")
	}
	if !strings.Contains(s, "://") {
		s = "https://" + s
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("server %q: not a URL", s)
	}
	s = strings.TrimRight(s, "/")
	s = strings.TrimSuffix(s, "/api/v1")
	return s, nil
}

// request is one API call.
type request struct {
	method  string
	path    string // below /api/v1, with a leading slash
	query   url.Values
	body    any // nil, []byte (JSON), io.Reader, or a value encoded as JSON
	ctype   string
	header  http.Header
	out     any // decoded JSON answer, or *[]byte for the raw body
	noToken bool
}

func (c *Client) newRequest(ctx context.Context, r request) (*http.Request, error) {
	u := c.Base + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	var rd io.Reader
	ctype := r.ctype
	switch b := r.body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case io.Reader:
		rd = b
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(j)
	}
	if rd != nil && ctype == "" {
		ctype = "application/json"
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, rd)
	if err != nil {
		return nil, fmt.Errorf("request: %w", err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "svc-cli")
	for k, vs := range r.header {
		req.Header.Del(k)
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if c.Token != "" && !r.noToken && req.Header.Get("Authorization") == "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	return req, nil
}

// Do sends one request; an error answer becomes *APIError.
func (c *Client) Do(ctx context.Context, r request) error {
	req, err := c.newRequest(ctx, r)
	if err != nil {
		return err
	}
	res, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", r.method, c.Server, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return fmt.Errorf("%s %s: reading answer: %w", r.method, r.path, err)
	}
	if res.StatusCode >= 400 {
		return decodeAPIError(res.StatusCode, body, c.Server)
	}
	if c.Warnings != nil {
		for _, w := range res.Header.Values("Warning") {
			fmt.Fprintln(c.Warnings, "Warning: "+warningText(w))
		}
	}
	switch o := r.out.(type) {
	case nil:
	case *[]byte:
		*o = body
	default:
		if len(bytes.TrimSpace(body)) == 0 {
			return nil
		}
		if err := json.Unmarshal(body, o); err != nil {
			return fmt.Errorf("%s %s: decoding answer: %w", r.method, r.path, err)
		}
	}
	return nil
}

// Stream sends a request and returns the open response of a success.
func (c *Client) Stream(ctx context.Context, r request) (*http.Response, error) {
	req, err := c.newRequest(ctx, r)
	if err != nil {
		return nil, err
	}
	res, err := c.HTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", r.method, c.Server, err)
	}
	if res.StatusCode >= 400 {
		defer res.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
		return nil, decodeAPIError(res.StatusCode, body, c.Server)
	}
	return res, nil
}

// warningText is the text of an RFC 7234 Warning value (299 - "text").
func warningText(v string) string {
	rest := v
	for range 2 { // code and agent
		if _, after, ok := strings.Cut(rest, " "); ok {
			rest = after
		}
	}
	if t, err := strconv.Unquote(rest); err == nil {
		return t
	}
	return v
}
