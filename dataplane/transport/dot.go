package transport

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/dataplane/proxyproto"
)

func (s *Server) startDoT(ctx context.Context, l Listener) error {
	tc, err := s.tlsConfig(s.reloadCtx, l, []string{"dot"})
	if err != nil {
		return err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", l.Address)
	if err != nil {
		return fmt.Errorf("dot listen %s: %w", l.Address, err)
	}
	s.tcp = append(s.tcp, ln)
	s.addrs[kindDoT] = append(s.addrs[kindDoT], addrPortOf(ln.Addr()))
	pln := &proxyproto.Listener{Listener: ln, Policy: s.cfg.ProxyProtocol, OnReject: func(netip.AddrPort, error) { s.m.reject("dot", "proxy") }}
	s.wg.Add(1)
	go s.acceptDoT(pln, tc)
	return nil
}

func (s *Server) acceptDoT(ln net.Listener, tc *tls.Config) {
	defer s.wg.Done()
	slots := make(chan struct{}, s.cfg.MaxConns)
	for {
		conn, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(5 * time.Millisecond) // EMFILE and friends: back off
			continue
		}
		select {
		case slots <- struct{}{}:
		default:
			s.m.reject("dot", "max_conns")
			_ = conn.Close()
			continue
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = conn.Close()
			<-slots
			continue
		}
		s.dotConns[conn] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer func() { <-slots }()
			s.serveDoT(conn, tc)
		}()
	}
}

// serveDoT reads length-framed queries (RFC 7858 3.3) and answers each on
// its own goroutine, out of order, with writes serialized.
func (s *Server) serveDoT(raw net.Conn, tc *tls.Config) {
	s.m.conns.WithLabelValues("dot").Inc()
	defer func() {
		s.m.conns.WithLabelValues("dot").Dec()
		s.mu.Lock()
		delete(s.dotConns, raw)
		s.mu.Unlock()
		_ = raw.Close()
		s.wg.Done()
	}()
	conn := tls.Server(raw, tc)
	hctx, cancel := context.WithTimeout(s.ctx, handshakeTimeout)
	err := conn.HandshakeContext(hctx)
	cancel()
	if err != nil {
		s.m.reject("dot", "handshake")
		return
	}
	client := addrPortOf(conn.RemoteAddr()) // the PROXY header's client, if any
	clientID := s.clientIDFromSNI(conn.ConnectionState().ServerName)
	maxInflight := s.cfg.MaxInflight
	if maxInflight <= 0 {
		maxInflight = 32
	}
	var (
		wmu      sync.Mutex
		inflight = make(chan struct{}, maxInflight)
		pending  sync.WaitGroup
		lenb     [2]byte
		idle     = s.idle(kindDoT)
	)
	defer pending.Wait()
	for {
		_ = conn.SetReadDeadline(time.Now().Add(idle))
		if _, err := io.ReadFull(conn, lenb[:]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint16(lenb[:]))
		bp := getBuf()
		if cap(*bp) < n {
			*bp = make([]byte, n)
		}
		in := (*bp)[:n]
		if _, err := io.ReadFull(conn, in); err != nil {
			putBuf(bp)
			return
		}
		inflight <- struct{}{}
		pending.Add(1)
		go func() {
			defer pending.Done()
			defer func() { <-inflight }()
			op := getBuf()
			out, ok := s.h.ServeWireID(in, client, dataplane.TransportDoT, clientID, append((*op)[:0], 0, 0))
			putBuf(bp)
			if ok && len(out)-2 <= maxMessage {
				binary.BigEndian.PutUint16(out, uint16(len(out)-2))
				wmu.Lock()
				_ = conn.SetWriteDeadline(time.Now().Add(idle))
				_, err := conn.Write(out)
				wmu.Unlock()
				if err != nil {
					_ = conn.SetReadDeadline(time.Now())
				}
			}
			*op = out
			putBuf(op)
		}()
	}
}
