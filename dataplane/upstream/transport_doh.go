package upstream

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"time"
)

const dnsMessageType = "application/dns-message"

// dohTransport posts queries (RFC 8484) over one shared HTTP/2 client, so
// queries multiplex over a kept-alive connection.
type dohTransport struct {
	url    string
	tr     *http.Transport
	client *http.Client
}

func newDoHTransport(a Address, d *dialer, base *tls.Config) *dohTransport {
	cfg := base.Clone()
	cfg.ServerName = a.Host
	tr := &http.Transport{
		// The URL's host is resolved by the bootstrap servers, never the
		// system resolver, which may be this very service.
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.dial(ctx, "tcp", a)
		},
		TLSClientConfig:        cfg,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           poolSize,
		MaxIdleConnsPerHost:    poolSize,
		IdleConnTimeout:        30 * time.Second,
		MaxResponseHeaderBytes: 16 << 10,
	}
	var protos http.Protocols
	protos.SetHTTP2(true)
	tr.Protocols = &protos
	return &dohTransport{
		url:    "https://" + a.HostPort() + a.Path,
		tr:     tr,
		client: &http.Client{Transport: tr},
	}
}

func (t *dohTransport) exchange(ctx context.Context, q []byte, ans *msgBuf) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(q))
	if err != nil {
		return nil, fmt.Errorf("doh request: %w", err)
	}
	req.Header.Set("Content-Type", dnsMessageType)
	req.Header.Set("Accept", dnsMessageType)
	resp, err := t.client.Do(req)
	if err != nil {
		return nil, ioErr(ctx, "doh", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("doh: %w: status %d", errHTTP, resp.StatusCode)
	}
	if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err != nil || mt != dnsMessageType {
		return nil, fmt.Errorf("doh: %w: content type %q", errHTTP, resp.Header.Get("Content-Type"))
	}
	// Read at most one byte more than a DNS message can hold, to tell a
	// full message from an oversized body; a declared length sizes the
	// buffer to the answer.
	size := maxMsgSize + 1
	if cl := resp.ContentLength; cl >= 0 && cl <= maxMsgSize {
		size = int(cl) + 1
	}
	buf := ans.take(size)
	n, err := io.ReadFull(io.LimitReader(resp.Body, int64(size)), buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, ioErr(ctx, "doh read", err)
	}
	if n >= size && size <= maxMsgSize {
		return nil, fmt.Errorf("doh: %w: body longer than its Content-Length %d", errMalformed, size-1)
	}
	if n > maxMsgSize {
		return nil, fmt.Errorf("doh: %w: body larger than %d bytes", errMalformed, maxMsgSize)
	}
	return buf[:n], nil
}

func (t *dohTransport) close() error {
	t.tr.CloseIdleConnections()
	return nil
}
