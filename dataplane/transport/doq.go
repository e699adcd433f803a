package transport

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/dataplane/transport/tlscert"
)

// DoQ error codes (RFC 9250 4.3).
const (
	DoQNoError          quic.ApplicationErrorCode = 0x0
	DoQInternalError    quic.ApplicationErrorCode = 0x1
	DoQProtocolError    quic.ApplicationErrorCode = 0x2
	DoQRequestCancelled quic.ApplicationErrorCode = 0x3
	DoQExcessiveLoad    quic.ApplicationErrorCode = 0x4
)

// maxDoQInflight bounds streams being answered across all DoQ connections
// of a server; past it new streams are reset with DOQ_EXCESSIVE_LOAD.
const maxDoQInflight = 4096

// quicConfig refuses 0-RTT: data in it can be replayed, and DNS queries
// carry client IDs and change cache state. Clients resend after the
// handshake completes.
func (s *Server) quicConfig(kind int) *quic.Config {
	streams := int64(s.cfg.MaxInflight)
	if streams <= 0 {
		streams = 100
	}
	c := &quic.Config{
		HandshakeIdleTimeout: handshakeTimeout,
		MaxIdleTimeout:       s.idle(),
		MaxIncomingStreams:   streams,
		Allow0RTT:            false,
	}
	if kind == kindDoQ {
		c.MaxIncomingUniStreams = -1 // DoQ uses bidirectional streams only
	}
	return c
}

func (s *Server) listenUDP(ctx context.Context, address string) (net.PacketConn, error) {
	var lc net.ListenConfig
	pc, err := lc.ListenPacket(ctx, "udp", address)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", address, err)
	}
	return pc, nil
}

func (s *Server) startDoQ(ctx context.Context, l Listener) error {
	tc, certs, err := s.tlsConfig(s.reloadCtx, l, []string{"doq"})
	if err != nil {
		return err
	}
	tc.MinVersion = tls.VersionTLS13
	pc, err := s.listenUDP(ctx, l.Address)
	if err != nil {
		return fmt.Errorf("doq: %w", err)
	}
	ln, err := quic.Listen(pc, tc, s.quicConfig(kindDoQ))
	if err != nil {
		_ = pc.Close()
		return fmt.Errorf("doq listen %s: %w", l.Address, err)
	}
	s.quic = append(s.quic, ln)
	s.addrs[kindDoQ] = append(s.addrs[kindDoQ], addrPortOf(pc.LocalAddr()))
	lim := &limitListener{QUICListener: ln, max: int64(s.cfg.MaxQUICConns), code: DoQExcessiveLoad,
		reject: func() { s.m.reject("doq", "max_conns") }}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer pc.Close()
		s.acceptDoQ(lim, certs)
	}()
	return nil
}

func (s *Server) acceptDoQ(ln http3.QUICListener, certs *tlscert.Reloader) {
	inflight := make(chan struct{}, maxDoQInflight)
	for {
		conn, err := ln.Accept(s.ctx)
		if err != nil {
			return // closed
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = conn.CloseWithError(DoQNoError, "")
			continue
		}
		s.quicConns[conn] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveDoQConn(conn, inflight, certs)
	}
}

func (s *Server) serveDoQConn(conn *quic.Conn, inflight chan struct{}, certs *tlscert.Reloader) {
	s.m.conns.WithLabelValues("doq").Inc()
	defer func() {
		s.m.conns.WithLabelValues("doq").Dec()
		s.mu.Lock()
		delete(s.quicConns, conn)
		s.mu.Unlock()
		s.wg.Done()
	}()
	client := addrPortOf(conn.RemoteAddr())
	clientID := s.clientIDFromSNI(conn.ConnectionState().TLS.ServerName, certs)
	for {
		st, err := conn.AcceptStream(s.ctx)
		if err != nil {
			return
		}
		select {
		case inflight <- struct{}{}:
		default:
			s.m.reject("doq", "excessive_load")
			st.CancelRead(quic.StreamErrorCode(DoQExcessiveLoad))
			st.CancelWrite(quic.StreamErrorCode(DoQExcessiveLoad))
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() { <-inflight }()
			s.serveDoQStream(conn, st, client, clientID)
		}()
	}
}

// serveDoQStream answers the one query of a stream (RFC 9250 4.2): 2-byte
// length, message with ID 0, then FIN. A nonzero ID or a broken message
// closes the connection with DOQ_PROTOCOL_ERROR.
func (s *Server) serveDoQStream(conn *quic.Conn, st *quic.Stream, client netip.AddrPort, clientID string) {
	_ = st.SetDeadline(time.Now().Add(s.idle()))
	var lenb [2]byte
	if _, err := io.ReadFull(st, lenb[:]); err != nil {
		st.CancelRead(quic.StreamErrorCode(DoQRequestCancelled))
		st.CancelWrite(quic.StreamErrorCode(DoQRequestCancelled))
		return
	}
	n := int(binary.BigEndian.Uint16(lenb[:]))
	protoErr := func(why string) {
		s.m.reject("doq", "protocol")
		_ = conn.CloseWithError(DoQProtocolError, why)
	}
	if n < 12 {
		protoErr("short message")
		return
	}
	bp := getBuf()
	defer putBuf(bp)
	if cap(*bp) < n {
		*bp = make([]byte, n)
	}
	in := (*bp)[:n]
	if _, err := io.ReadFull(st, in); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			protoErr("truncated message")
			return
		}
		st.CancelRead(quic.StreamErrorCode(DoQRequestCancelled))
		st.CancelWrite(quic.StreamErrorCode(DoQRequestCancelled))
		return
	}
	if binary.BigEndian.Uint16(in) != 0 {
		protoErr("message ID must be 0")
		return
	}
	op := getBuf()
	defer putBuf(op)
	out, ok := s.h.ServeWireID(in, client, dataplane.TransportDoQ, clientID, append((*op)[:0], 0, 0))
	*op = out
	if !ok {
		protoErr("not a query")
		return
	}
	if len(out)-2 > maxMessage {
		st.CancelWrite(quic.StreamErrorCode(DoQInternalError))
		return
	}
	binary.BigEndian.PutUint16(out, uint16(len(out)-2))
	if _, err := st.Write(out); err != nil {
		return
	}
	_ = st.Close() // FIN
}

func (s *Server) startDoH3(ctx context.Context, l Listener) error {
	tc, _, err := s.tlsConfig(s.reloadCtx, l, nil)
	if err != nil {
		return err
	}
	tc.MinVersion = tls.VersionTLS13
	pc, err := s.listenUDP(ctx, l.Address)
	if err != nil {
		return fmt.Errorf("doh3: %w", err)
	}
	// The listener is ours, not the http3.Server's, so that it can bound
	// the connections (http3.Server accepts them itself).
	// Listen, not ListenEarly: 0-RTT is off, and a connection accepted
	// before its handshake is done could only be refused with a bare
	// APPLICATION_ERROR (RFC 9000 10.2.3), not H3_EXCESSIVE_LOAD.
	ln, err := quic.Listen(pc, http3.ConfigureTLSConfig(tc), s.quicConfig(kindDoH3))
	if err != nil {
		_ = pc.Close()
		return fmt.Errorf("doh3 listen %s: %w", l.Address, err)
	}
	srv := &http3.Server{
		Handler:        s.newDoHHandler(l, dataplane.TransportDoH3, "doh3"),
		MaxHeaderBytes: 16 << 10,
		IdleTimeout:    s.idle(),
	}
	lim := &limitListener{QUICListener: ln, max: int64(s.cfg.MaxQUICConns), code: h3ExcessiveLoad,
		reject: func() { s.m.reject("doh3", "max_conns") }}
	s.h3 = append(s.h3, srv)
	s.addrs[kindDoH3] = append(s.addrs[kindDoH3], addrPortOf(pc.LocalAddr()))
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer pc.Close()
		defer ln.Close()
		if err := srv.ServeListener(lim); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			s.log.Error("doh3 listener stopped", "address", l.Address, "err", err)
		}
	}()
	return nil
}

// h3ExcessiveLoad is HTTP/3's H3_EXCESSIVE_LOAD (RFC 9114 8.1).
const h3ExcessiveLoad = 0x0107

// limitListener passes on at most max QUIC connections at once (DoQ, and
// DoH3, whose connections http3.Server accepts itself); one more is closed
// with code as soon as its handshake is done.
type limitListener struct {
	http3.QUICListener
	max    int64
	n      atomic.Int64
	code   quic.ApplicationErrorCode
	reject func()
}

func (l *limitListener) Accept(ctx context.Context) (*quic.Conn, error) {
	for {
		c, err := l.QUICListener.Accept(ctx)
		if err != nil {
			return nil, err
		}
		if l.n.Add(1) > l.max {
			l.n.Add(-1)
			l.reject()
			_ = c.CloseWithError(l.code, "too many connections")
			continue
		}
		context.AfterFunc(c.Context(), func() { l.n.Add(-1) })
		return c, nil
	}
}
