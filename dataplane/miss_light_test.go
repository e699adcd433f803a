package dataplane

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// unpackingForwarder hides the resolver's ForwardRaw: every answer is
// unpacked, as before light answers.
type unpackingForwarder struct{ f Forwarder }

func (u unpackingForwarder) Forward(ctx context.Context, group string, req *dns.Msg, client netip.Addr) (*dns.Msg, string, error) {
	return u.f.Forward(ctx, group, req, client)
}

// replayUpstream answers every query with the header bits and records set
// by set (the query's ID and question, QR on, TC off, then the records'
// bytes as given), whatever they are.
type replayUpstream struct {
	mu                sync.Mutex
	flags, an, ns, ar uint16
	body              []byte
}

func (u *replayUpstream) set(flags, an, ns, ar uint16, body []byte) {
	u.mu.Lock()
	u.flags, u.an, u.ns, u.ar, u.body = flags, an, ns, ar, append(u.body[:0], body...)
	u.mu.Unlock()
}

func (u *replayUpstream) start(tb testing.TB) string { return startUDPResponder(tb, u.answer) }

// answer appends to out the answer to query q.
func (u *replayUpstream) answer(out, q []byte) ([]byte, bool) {
	end := 12
	for end < len(q) && q[end] != 0 {
		end += 1 + int(q[end])
	}
	end += 5
	if len(q) < 12 || end > len(q) {
		return out, false
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	out = append(out, q[:12]...)
	binary.BigEndian.PutUint16(out[2:], u.flags|0x8000&^0x0200)
	binary.BigEndian.PutUint16(out[4:], 1)
	binary.BigEndian.PutUint16(out[6:], u.an)
	binary.BigEndian.PutUint16(out[8:], u.ns)
	binary.BigEndian.PutUint16(out[10:], u.ar)
	return append(append(out, q[12:end]...), u.body...), true
}

// answerText is an answer's header and records in presentation form, the
// ID aside.
func answerText(b []byte) string {
	m := new(dns.Msg)
	if err := m.Unpack(b); err != nil {
		return "unpack: " + err.Error()
	}
	m.Id = 0
	var sb strings.Builder
	sb.WriteString(m.MsgHdr.String())
	for _, rr := range append(append(append([]dns.RR{}, m.Answer...), m.Ns...), m.Extra...) {
		sb.WriteString("\n" + rr.String())
	}
	return sb.String()
}

// FuzzLightMiss: a cache miss answered from the upstream's bytes (a light
// answer, kept by cache.StoreRaw) reads exactly as the same miss answered
// through the unpacked message, for any answer an upstream may send (the
// records' bytes and the header's flags and counts are the fuzzer's), and
// so does the cache hit after it. A third server answers the same miss over
// real UDP on the async lane (the upstream socket's reader finishes it, or
// hands it to a worker), which must read the same too.
func FuzzLightMiss(f *testing.F) {
	seed := func(rcode int, records ...string) {
		m := new(dns.Msg)
		m.SetQuestion("x.", dns.TypeA)
		m.Response, m.Rcode, m.Compress = true, rcode, true
		for _, s := range records {
			m.Answer = append(m.Answer, mustRR(f, s))
		}
		m.SetEdns0(1232, false)
		b := pack(f, m)
		body := b[12+len("\x01x\x00")+4:]
		f.Add(binary.BigEndian.Uint16(b[2:]), uint16(len(m.Answer)), uint16(0), uint16(1), body)
	}
	seed(dns.RcodeSuccess, "x. 300 IN A 192.0.2.1")
	seed(dns.RcodeSuccess, "x. 60 IN CNAME y.", "y. 30 IN A 192.0.2.2")
	seed(dns.RcodeNameError)
	seed(dns.RcodeSuccess, "x. 300 IN TXT \"a\" \"b\"", "x. 300 IN MX 10 mail.")
	up := &replayUpstream{}
	res := resolverFor(f, up.start(f))
	light := missServer(f, true, SnapshotInput{Forwarder: res, Router: res})
	unpacked := missServer(f, true, SnapshotInput{Forwarder: unpackingForwarder{res}, Router: res})
	lane := startServer(f, testConfig(), NewSnapshot(SnapshotInput{Forwarder: res, Router: res}))
	lc, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(lane.UDPAddrs()[0]))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { lc.Close() })
	var laneMu sync.Mutex // one exchange at a time on lc
	laneBuf := make([]byte, 65535)
	var laneID atomic.Uint32
	askLane := func(t *testing.T, name string) []byte {
		laneMu.Lock()
		defer laneMu.Unlock()
		m := query(name, dns.TypeA)
		m.SetEdns0(1232, true)
		m.Id = uint16(laneID.Add(1))
		if _, err := lc.Write(pack(t, m)); err != nil {
			t.Fatal(err)
		}
		for { // skip an answer to an earlier query that came late
			_ = lc.SetReadDeadline(time.Now().Add(5 * time.Second))
			n, err := lc.Read(laneBuf)
			if err != nil {
				t.Fatalf("the async lane did not answer %s: %v", name, err)
			}
			if n >= 2 && binary.BigEndian.Uint16(laneBuf) == m.Id {
				return append([]byte(nil), laneBuf[:n]...)
			}
		}
	}
	client := netip.MustParseAddrPort("192.0.2.9:5353")
	var seq atomic.Uint64
	f.Fuzz(func(t *testing.T, flags, an, ns, ar uint16, body []byte) {
		if an > 64 || ns > 64 || ar > 64 || len(body) > 1200 {
			return
		}
		up.set(flags, an, ns, ar, body)
		// An answer whose names read its own ID (a pointer into the
		// header) differs from query to query, as the upstream IDs do.
		readsID := func(name string) bool {
			m := query(name, dns.TypeA)
			m.SetEdns0(1232, true)
			probe := pack(t, m)
			var texts [3]string
			for i, id := range []uint16{0, 0x0101, 0xFFFF} {
				binary.BigEndian.PutUint16(probe, id)
				a, _ := up.answer(nil, probe)
				texts[i] = answerText(a)
			}
			return texts[0] != texts[1] || texts[0] != texts[2]
		}
		ask := func(s *Server, name string) []byte {
			m := query(name, dns.TypeA)
			m.SetEdns0(1232, true)
			out, _ := s.ServeWire(pack(t, m), client, TransportUDP, nil)
			return out
		}
		norm := func(s, name string) string { return strings.ReplaceAll(s, name, "NAME.") }
		var a, b string
		for try := 0; ; try++ {
			n := seq.Add(1)
			// One name for both: the servers share only the resolver,
			// asked one after the other.
			a = fmt.Sprintf("m%d.example.net.", n)
			b = a
			if readsID(a) {
				return
			}
			gotL, gotU, gotA := ask(light, a), ask(unpacked, b), askLane(t, a)
			l, u, la := norm(answerText(gotL), a), norm(answerText(gotU), b), norm(answerText(gotA), a)
			if l == u && la == u {
				break
			}
			// One SERVFAIL alone may be a timeout of a loaded machine
			// (the paths wait on the same upstream): ask again.
			sf := func(b []byte) bool { return b[3]&0xF == dns.RcodeServerFailure }
			if try < 2 && (sf(gotL) != sf(gotU) || sf(gotA) != sf(gotU)) {
				continue
			}
			if l != u {
				t.Fatalf("miss: light answer\n%s\nunpacked\n%s", l, u)
			}
			t.Fatalf("miss: the async lane's answer\n%s\nunpacked\n%s", la, u)
		}
		hitL, hitU, hitA := ask(light, a), ask(unpacked, b), askLane(t, a)
		if l, u := norm(answerText(hitL), a), norm(answerText(hitU), b); l != u {
			t.Fatalf("hit: light entry\n%s\nunpacked entry\n%s", l, u)
		}
		if la, u := norm(answerText(hitA), a), norm(answerText(hitU), b); la != u {
			t.Fatalf("hit: the async lane's entry\n%s\nunpacked entry\n%s", la, u)
		}
	})
}
