package upstream

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/quic-go/quic-go"

	"github.com/svcdns/svc/test/fakeupstream"
	"github.com/svcdns/svc/test/testpki"
)

// responder builds the answer to a query; nil drops it.
type responder func(req *dns.Msg) *dns.Msg

// answerA answers every A query with ip.
func answerA(ip string) responder {
	return func(req *dns.Msg) *dns.Msg {
		m := new(dns.Msg)
		m.SetReply(req)
		if req.Question[0].Qtype == dns.TypeA {
			m.Answer = append(m.Answer, &dns.A{
				Hdr: dns.RR_Header{Name: req.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
				A:   net.ParseIP(ip),
			})
		}
		return m
	}
}

func answerRcode(rcode int) responder {
	return func(req *dns.Msg) *dns.Msg {
		m := new(dns.Msg)
		m.SetRcode(req, rcode)
		return m
	}
}

func drop(*dns.Msg) *dns.Msg { return nil }

// delayed answers after d (longer than a timeout makes a slow server).
func delayed(d time.Duration, next responder) responder {
	return func(req *dns.Msg) *dns.Msg {
		time.Sleep(d)
		return next(req)
	}
}

// counted counts the queries reaching next.
func counted(n *atomic.Int64, next responder) responder {
	return func(req *dns.Msg) *dns.Msg {
		n.Add(1)
		return next(req)
	}
}

func handler(f responder) dns.Handler {
	return dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		if m := f(r); m != nil {
			_ = w.WriteMsg(m)
		}
	})
}

// countingListener counts accepted connections, to observe reuse.
type countingListener struct {
	net.Listener
	accepted atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

// startServer runs a miekg/dns server on pc or l and stops it at cleanup.
func startServer(t testing.TB, srv *dns.Server) {
	t.Helper()
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	done := make(chan error, 1)
	go func() { done <- srv.ActivateAndServe() }()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("dns server: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("dns server did not start")
	}
	t.Cleanup(func() {
		_ = srv.Shutdown()
		<-done
	})
}

// startUDP serves f over UDP on 127.0.0.1 port 0 and returns host:port.
func startUDP(t testing.TB, f responder) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	startServer(t, &dns.Server{PacketConn: pc, Handler: handler(f)})
	return pc.LocalAddr().String()
}

// startTCP serves f over TCP and returns host:port and the listener.
func startTCP(t testing.TB, f responder) (string, *countingListener) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: l}
	startServer(t, &dns.Server{Listener: cl, Handler: handler(f), IdleTimeout: func() time.Duration { return 30 * time.Second }})
	return l.Addr().String(), cl
}

// startUDPAndTCP serves udp and tcp responders on one port number.
func startUDPAndTCP(t testing.TB, udp, tcp responder) string {
	t.Helper()
	return fakeupstream.UDPAndTCP(t, handler(udp), handler(tcp))
}

// testPKI is the test CA and its certificate for dns.test and 127.0.0.1,
// with the upstream tests' server config.
type testPKI struct{ *testpki.PKI }

func newTestPKI(t *testing.T) *testPKI { return &testPKI{testpki.New(t)} }

// serverTLS records the SNI names the server saw.
func (p *testPKI) serverTLS(sni *sync.Map, protos ...string) *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{p.Leaf},
		NextProtos:   protos,
		MinVersion:   tls.VersionTLS12,
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			if sni != nil {
				sni.Store(h.ServerName, true)
			}
			return nil, nil
		},
	}
}

// startDoT serves f over DNS over TLS.
func startDoT(t testing.TB, pki *testPKI, sni *sync.Map, f responder) (string, *countingListener) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: l}
	tl := tls.NewListener(cl, pki.serverTLS(sni))
	startServer(t, &dns.Server{Listener: tl, Net: "tcp-tls", Handler: handler(f), IdleTimeout: func() time.Duration { return 30 * time.Second }})
	return l.Addr().String(), cl
}

// dohServer is an HTTP/2 DoH endpoint; it records protocol and method.
type dohServer struct {
	srv      *httptest.Server
	conns    atomic.Int64
	badProto atomic.Int64 // requests not HTTP/2 POST application/dns-message
	nonZero  atomic.Int64 // queries with a message ID other than 0
}

func startDoH(t testing.TB, pki *testPKI, sni *sync.Map, f responder) *dohServer {
	t.Helper()
	d := &dohServer{}
	mux := http.NewServeMux()
	mux.HandleFunc("/dns-query", func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 || r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/dns-message" {
			d.badProto.Add(1)
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 65536))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req := new(dns.Msg)
		if err := req.Unpack(body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if req.Id != 0 {
			d.nonZero.Add(1)
		}
		m := f(req)
		if m == nil {
			http.Error(w, "dropped", http.StatusServiceUnavailable)
			return
		}
		out, err := m.Pack()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/dns-message")
		_, _ = w.Write(out)
	})
	d.srv = httptest.NewUnstartedServer(mux)
	d.srv.EnableHTTP2 = true
	d.srv.TLS = pki.serverTLS(sni, "h2")
	d.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			d.conns.Add(1)
		}
	}
	d.srv.StartTLS()
	t.Cleanup(d.srv.Close)
	return d
}

func (d *dohServer) hostPort() string { return d.srv.Listener.Addr().String() }

// doqServer is a DNS over QUIC server (RFC 9250) built on quic-go.
type doqServer struct {
	l       *quic.Listener
	conns   atomic.Int64
	nonZero atomic.Int64
	wg      sync.WaitGroup
	stop    func() // idempotent; also run at cleanup
}

func startDoQ(t testing.TB, pki *testPKI, sni *sync.Map, f responder) *doqServer {
	return startDoQAt(t, "127.0.0.1:0", pki, sni, f)
}

func startDoQAt(t testing.TB, addr string, pki *testPKI, sni *sync.Map, f responder) *doqServer {
	t.Helper()
	var l *quic.Listener
	var err error
	// A restarted server may wait briefly for quic-go to release the port.
	for range 100 {
		l, err = quic.ListenAddr(addr, pki.serverTLS(sni, "doq"), &quic.Config{MaxIdleTimeout: 30 * time.Second})
		if err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	s := &doqServer{l: l}
	ctx, cancel := context.WithCancel(context.Background())
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := l.Accept(ctx)
			if err != nil {
				return
			}
			s.conns.Add(1)
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.CloseWithError(0, "")
				for {
					st, err := c.AcceptStream(ctx)
					if err != nil {
						return
					}
					s.wg.Add(1)
					go func() {
						defer s.wg.Done()
						s.serveStream(st, f)
					}()
				}
			}()
		}
	}()
	var once sync.Once
	s.stop = func() {
		once.Do(func() {
			cancel()
			l.Close()
			s.wg.Wait()
		})
	}
	t.Cleanup(s.stop)
	return s
}

func (s *doqServer) serveStream(st *quic.Stream, f responder) {
	defer st.Close()
	_ = st.SetDeadline(time.Now().Add(10 * time.Second))
	var lb [2]byte
	if _, err := io.ReadFull(st, lb[:]); err != nil {
		return
	}
	buf := make([]byte, binary.BigEndian.Uint16(lb[:]))
	if _, err := io.ReadFull(st, buf); err != nil {
		return
	}
	req := new(dns.Msg)
	if err := req.Unpack(buf); err != nil {
		return
	}
	if req.Id != 0 {
		s.nonZero.Add(1)
	}
	m := f(req)
	if m == nil {
		st.CancelWrite(0x2)
		return
	}
	out, err := m.Pack()
	if err != nil {
		return
	}
	_, _ = st.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(out))), out...))
}

func (s *doqServer) hostPort() string { return s.l.Addr().String() }

// query makes a client query with a fixed ID.
func query(name string, qtype uint16) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	m.Id = 4242
	return m
}

var clientAddr = netip.MustParseAddr("192.0.2.77")

// newResolver builds a Resolver on a fresh registry and closes it at cleanup.
func newResolver(t testing.TB, cfg Config) *Resolver {
	t.Helper()
	if cfg.Bootstrap == nil {
		cfg.Bootstrap = []string{} // never reach the public default in tests
	}
	r, err := New(cfg, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// firstA returns the address of the first A record of m.
func firstA(t testing.TB, m *dns.Msg) string {
	t.Helper()
	if m == nil {
		t.Fatal("no answer")
	}
	for _, rr := range m.Answer {
		if a, ok := rr.(*dns.A); ok {
			return a.A.String()
		}
	}
	t.Fatalf("no A record in %v", m)
	return ""
}

func writeFile(name string, b []byte) error { return os.WriteFile(name, b, 0o600) }

// errorCount reads service_upstream_errors_total for one upstream and reason.
func errorCount(t testing.TB, r *Resolver, group, upstream, reason string) float64 {
	t.Helper()
	g := r.groups[group]
	for _, u := range g.ups {
		if u.name == upstream {
			return testutil.ToFloat64(u.m.errors[reason])
		}
	}
	t.Fatalf("no upstream %q in group %q", upstream, group)
	return 0
}
