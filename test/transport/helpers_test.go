// Package transport_test runs the encrypted transports end to end against
// the real data plane with third-party clients: kdig and dig for DoT and
// DoH, quic-go's own client code for DoQ and DoH3 (see docs/transports.md:
// no DoQ/DoH3 command-line client could be installed here).
package transport_test

import (
	"context"
	"encoding/binary"
	"io"
	"net/netip"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/dataplane/authority"
	"github.com/svcdns/svc/dataplane/cache"
	"github.com/svcdns/svc/dataplane/proxyproto"
	"github.com/svcdns/svc/dataplane/transport"
	"github.com/svcdns/svc/test/proc"
	"github.com/svcdns/svc/test/testpki"
)

const serverName = testpki.ServerName

// memLog keeps query records.
type memLog struct {
	mu   sync.Mutex
	recs []dataplane.QueryRecord
}

func (l *memLog) Log(r dataplane.QueryRecord) {
	l.mu.Lock()
	l.recs = append(l.recs, r)
	l.mu.Unlock()
}

func (l *memLog) clients(name string) []netip.Addr {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []netip.Addr
	for i := range l.recs {
		if l.recs[i].Name() == name {
			out = append(out, l.recs[i].Client.Addr())
		}
	}
	return out
}

// idRecorder wraps the real data plane and records the client IDs the
// transports pass in.
type idRecorder struct {
	*dataplane.Server
	mu  sync.Mutex
	ids map[dataplane.Transport][]string
}

func (r *idRecorder) ServeWireID(in []byte, client netip.AddrPort, t dataplane.Transport, id string, out []byte) ([]byte, bool) {
	r.mu.Lock()
	r.ids[t] = append(r.ids[t], id) // "" records the transport alone
	r.mu.Unlock()
	return r.Server.ServeWireID(in, client, t, id, out)
}

func (r *idRecorder) ServeWireNow(in []byte, client netip.AddrPort, t dataplane.Transport, id string, out []byte, cb dataplane.WireCallback) ([]byte, bool, bool) {
	r.mu.Lock()
	r.ids[t] = append(r.ids[t], id)
	r.mu.Unlock()
	return r.Server.ServeWireNow(in, client, t, id, out, cb)
}

// seenTransport reports whether any query arrived over t.
func (r *idRecorder) seenTransport(t dataplane.Transport) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ids[t]) > 0
}

func (r *idRecorder) seen(t dataplane.Transport, id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, x := range r.ids[t] {
		if x == id {
			return true
		}
	}
	return false
}

// count is how many queries arrived over t so far; idsSince lists the
// client IDs of those after the first n.
func (r *idRecorder) count(t dataplane.Transport) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ids[t])
}

func (r *idRecorder) idsSince(t dataplane.Transport, n int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ids[t][n:])
}

type stack struct {
	dp  *dataplane.Server
	tr  *transport.Server
	rec *idRecorder
	log *memLog
	pki *testpki.PKI
}

type stackOpts struct {
	proxy     *proxyproto.Policy
	transport func(*transport.Config)
	noTLS     bool
	// bench: no query log and no client ID recorder in front of the
	// data plane (rec is nil).
	bench bool
	// forwarder answers names outside example.com (nil: refused).
	forwarder dataplane.Forwarder
}

// newStack starts the data plane (UDP and TCP) and every encrypted
// listener on 127.0.0.1 port 0, with zone example.com (www A 192.0.2.1,
// TTL 300). Cleanup stops both.
func newStack(t testing.TB, o stackOpts) *stack {
	t.Helper()
	z := v1alpha1.DNSZone{}
	z.Name, z.Spec.ZoneName = "example-com", "example.com"
	rs := v1alpha1.DNSRecordSet{}
	rs.Namespace, rs.Name = "default", "www"
	rs.Spec.ZoneRef.Name = "example-com"
	rs.Spec.Endpoints = []v1alpha1.Endpoint{{DNSName: "www", RecordType: "A", Targets: []string{"192.0.2.1"}, RecordTTL: ptr(int64(300))}}
	tab, problems := authority.Compile([]v1alpha1.DNSZone{z}, []v1alpha1.DNSRecordSet{rs}, time.Now())
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	st := &stack{log: &memLog{}}
	sockets := 1
	if o.bench {
		sockets = 0 // the production default: one UDP socket per CPU
	}
	cc := cache.DefaultConfig()
	cc.MaxEntries = 1000
	dp, err := dataplane.New(dataplane.Config{
		Node: "node-a", Listeners: []dataplane.ListenerConfig{{Address: "127.0.0.1:0"}}, Sockets: sockets, Cache: cc,
		ProxyProtocol: o.proxy,
	}, dataplane.Options{QueryLogger: queryLogger(st.log, o.bench)})
	if err != nil {
		t.Fatal(err)
	}
	dp.Swap(dataplane.NewSnapshot(dataplane.SnapshotInput{Authority: tab, Forwarder: o.forwarder}))
	if err := dp.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	st.dp = dp
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := dp.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	if o.noTLS {
		return st
	}
	st.pki = testpki.New(t)
	l := transport.Listener{Address: "127.0.0.1:0", CertFile: st.pki.CertFile, KeyFile: st.pki.KeyFile}
	cfg := transport.Config{
		DoT: []transport.Listener{l}, DoH: []transport.Listener{l}, DoQ: []transport.Listener{l}, DoH3: []transport.Listener{l},
		ClientIDDomain: serverName, ProxyProtocol: o.proxy, CertReloadInterval: 50 * time.Millisecond,
	}
	if o.transport != nil {
		o.transport(&cfg)
	}
	st.rec = &idRecorder{Server: dp, ids: map[dataplane.Transport][]string{}}
	var h transport.Handler = st.rec
	if o.bench {
		h, st.rec = dp, nil
	}
	tr, err := transport.New(h, cfg, transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	st.tr = tr
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tr.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	return st
}

func (st *stack) addr(kind string) netip.AddrPort {
	switch kind {
	case "udp":
		return st.dp.UDPAddrs()[0]
	case "tcp":
		return st.dp.TCPAddrs()[0]
	}
	return st.tr.Addrs(kind)[0]
}

// tool finds a third-party client or fails the test naming the script
// that installs it.
func tool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found: run hack/install-test-deps.sh (its Debian packages)", name)
	}
	return p
}

func queryLogger(l *memLog, bench bool) dataplane.QueryLogger {
	if bench {
		return nil
	}
	return l
}

func ptr[T any](v T) *T { return &v }

// readDoT reads one length-prefixed DoT message.
func readDoT(t testing.TB, c io.Reader) []byte {
	t.Helper()
	var lb [2]byte
	if _, err := io.ReadFull(c, lb[:]); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, binary.BigEndian.Uint16(lb[:]))
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatal(err)
	}
	return b
}

// process is a third-party program the test runs, with its output kept.
type process = proc.Process

// startProcess runs bin with args; the test stops it.
func startProcess(t *testing.T, bin string, args ...string) *process {
	t.Helper()
	return proc.Start(t, bin, args...)
}

// startProcessEnv is startProcess with the environment env (nil: this
// process's).
func startProcessEnv(t *testing.T, env []string, bin string, args ...string) *process {
	t.Helper()
	return proc.StartEnv(t, env, bin, args...)
}
