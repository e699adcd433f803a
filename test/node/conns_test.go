package node_test

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/quic-go/quic-go"

	"github.com/svcdns/svc/test/nodetest"
	"github.com/svcdns/svc/test/testpki"
)

// TestNodeHoldsManyIdleConnections: a node configured from its files holds
// more idle DoT and plain TCP connections than the data plane's and the
// transports' built-in default of 1000 (the node sizes the limit from its
// descriptor limit), and with all of them open a new client is answered
// over each, and so are the newest held connections. DoQ (no descriptor per
// connection) holds as many.
func TestNodeHoldsManyIdleConnections(t *testing.T) {
	n := 1500
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Cur < uint64(4*n+2048) {
		// Client and server ends are both in this process.
		n = max(int(lim.Cur-2048)/4, 100)
		t.Logf("descriptor limit %d: holding %d connections of each kind", lim.Cur, n)
	}
	pki := testpki.New(t)
	tn := startNode(t, nodetest.TLS(pki.CertFile, pki.KeyFile), nodetest.Objects(map[string]string{"zone.yaml": zoneDoc}))
	dot, tcp := tn.DNSAddr("dot"), tn.DNSAddr("tcp")
	tc := &tls.Config{ServerName: testpki.ServerName, RootCAs: pki.Pool, NextProtos: []string{"dot"}, ClientSessionCache: tls.NewLRUClientSessionCache(1)}

	held := make([]net.Conn, 2*n)
	t.Cleanup(func() {
		for _, c := range held {
			if c != nil {
				c.Close()
			}
		}
	})
	err := inParallel(2*n, func(i int) error {
		var err error
		if i < n {
			d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second}, Config: tc}
			held[i], err = d.Dial("tcp", dot) // returns after the handshake
		} else {
			held[i], err = net.DialTimeout("tcp", tcp, 5*time.Second)
		}
		return err
	})
	if err != nil {
		t.Fatalf("opening %d DoT and %d TCP connections: %v", n, n, err)
	}
	// Let the server take in every connection (a refused one is closed
	// after the client's dial returned).
	time.Sleep(500 * time.Millisecond)

	ask := func(c net.Conn, id uint16) error {
		m := new(dns.Msg)
		m.SetQuestion("www.example.test.", dns.TypeA)
		m.Id = id
		b, _ := m.Pack()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(b))), b...)); err != nil {
			return err
		}
		var lb [2]byte
		if _, err := io.ReadFull(c, lb[:]); err != nil {
			return err
		}
		resp := make([]byte, binary.BigEndian.Uint16(lb[:]))
		if _, err := io.ReadFull(c, resp); err != nil {
			return err
		}
		r := new(dns.Msg)
		if err := r.Unpack(resp); err != nil {
			return err
		}
		if r.Id != id || len(aRecords(r)) != 1 {
			t.Errorf("answer %v", r)
		}
		return nil
	}
	// The newest held connections (past the old limit) are still served.
	for _, i := range []int{0, n - 1, n, 2*n - 1} {
		if err := ask(held[i], uint16(i)); err != nil {
			t.Fatalf("held connection %d of %d (DoT first, then TCP): %v", i, 2*n, err)
		}
	}
	// DoQ: as many QUIC connections, over one client socket (QUIC needs
	// no descriptor per connection on either side).
	doq := tn.DNSAddr("doq")
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	qt := &quic.Transport{Conn: udp}
	t.Cleanup(func() { qt.Close() })
	qaddr, err := net.ResolveUDPAddr("udp", doq)
	if err != nil {
		t.Fatal(err)
	}
	qtc := &tls.Config{ServerName: testpki.ServerName, RootCAs: pki.Pool, NextProtos: []string{"doq"}, ClientSessionCache: tls.NewLRUClientSessionCache(1)}
	qconns := make([]*quic.Conn, n)
	err = inParallel(n, func(i int) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var err error
		qconns[i], err = qt.Dial(ctx, qaddr, qtc, &quic.Config{KeepAlivePeriod: 5 * time.Second})
		return err
	})
	if err != nil {
		t.Fatalf("opening %d DoQ connections: %v", n, err)
	}
	time.Sleep(500 * time.Millisecond)
	for _, i := range []int{0, n - 1} {
		if r, err := askDoQConn(qconns[i], question("www.example.test.")); err != nil || len(aRecords(r)) != 1 {
			t.Fatalf("held DoQ connection %d of %d: %v %v", i, n, r, err)
		}
	}
	if r, err := askDoQ(pki, doq, testpki.ServerName, question("www.example.test.")); err != nil || len(aRecords(r)) != 1 {
		t.Fatalf("new DoQ client with %d held: %v %v", n, r, err)
	}

	// New clients are answered.
	if r, err := askDoT(pki, dot, testpki.ServerName, question("www.example.test.")); err != nil || len(aRecords(r)) != 1 {
		t.Fatalf("new DoT client with %d held: %v %v", n, r, err)
	}
	if r := tn.Query(t, "tcp", "www.example.test", dns.TypeA); len(aRecords(r)) != 1 {
		t.Fatalf("new TCP client with %d held: %v", n, r)
	}
	if !tn.Log.Contains("connection limit") {
		t.Error("the node did not log its connection limit")
	}
}

// inParallel runs f for 0..n-1 on 8 goroutines and returns the first
// error.
func inParallel(n int, f func(i int) error) error {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	work := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := f(i); err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	return <-errs
}
