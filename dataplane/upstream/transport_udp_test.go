package upstream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// rawUDPServer calls serve for each query read on a loopback socket, in
// its read loop; it stops at cleanup.
func rawUDPServer(t testing.TB, serve func(pc net.PacketConn, from net.Addr, req *dns.Msg)) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, maxMsgSize)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			req := new(dns.Msg)
			if req.Unpack(buf[:n]) != nil || len(req.Question) != 1 {
				continue
			}
			serve(pc, from, req)
		}
	}()
	t.Cleanup(func() {
		pc.Close()
		wg.Wait()
	})
	return pc.LocalAddr().String()
}

func sendMsg(c net.PacketConn, to net.Addr, m *dns.Msg) {
	if out, err := m.Pack(); err == nil {
		_, _ = c.WriteTo(out, to)
	}
}

// newTestPool builds a pool of n sockets for addr, closed at cleanup.
func newTestPool(t testing.TB, addr string, n int) (*udpPool, *udpTransport) {
	t.Helper()
	a, err := ParseAddress(addr)
	if err != nil {
		t.Fatal(err)
	}
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	d := &dialer{}
	p := newUDPPool(a, d, m)
	p.slots = p.slots[:n]
	tr := &udpTransport{addr: a, d: d, tcp: newStreamTransport(tcpDial(d, a)), pool: p}
	t.Cleanup(func() { _ = tr.close() })
	return p, tr
}

func (p *udpPool) dropped(reason string) float64 {
	for i, r := range dropReasons {
		if r == reason {
			return testutil.ToFloat64(p.drops[i])
		}
	}
	panic(reason)
}

// outstanding counts the queries waiting on every open socket.
func (p *udpPool) outstanding() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for s := range p.live {
		s.mu.Lock()
		n += len(s.pending)
		s.mu.Unlock()
	}
	return n
}

// eventually polls cond for up to 2s.
func eventually(cond func() bool) bool {
	for range 200 {
		if cond() {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return cond()
}

// ask sends one query for name through t with the given ID.
func ask(ctx context.Context, t transport, name string, qtype uint16, id uint16) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	wire, err := m.Pack()
	if err != nil {
		return nil, err
	}
	return exchangeWire(ctx, t, newBufPool(), wire, id, m.Question[0])
}

// TestUDPPoolDropsSpoofedAnswers: before the real answer, the upstream's
// port sees a forged answer from another socket and the query's socket
// gets answers with a wrong ID, another name, type or class, and a packet
// that is not a response. Only the real answer is delivered; the others are
// dropped and counted.
func TestUDPPoolDropsSpoofedAnswers(t *testing.T) {
	attacker, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer attacker.Close()
	var pp atomic.Pointer[udpPool] // set before the first query
	var countedAll atomic.Bool
	addr := rawUDPServer(t, func(pc net.PacketConn, from net.Addr, req *dns.Msg) {
		// Right ID and question, from the wrong source port.
		sendMsg(attacker, from, answerA("203.0.113.1")(req))
		// Wrong ID.
		m := answerA("203.0.113.2")(req)
		m.Id ^= 0x5a5a
		sendMsg(pc, from, m)
		// Right ID, other name, type and class.
		for i, edit := range []func(q *dns.Question){
			func(q *dns.Question) { q.Name = "evil.example." },
			func(q *dns.Question) { q.Qtype = dns.TypeAAAA },
			func(q *dns.Question) { q.Qclass = dns.ClassCHAOS },
		} {
			other := req.Copy()
			edit(&other.Question[0])
			m := answerA(fmt.Sprintf("203.0.113.%d", 10+i))(other)
			m.Answer = append(m.Answer, &dns.A{
				Hdr: dns.RR_Header{Name: req.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
				A:   net.IPv4(203, 0, 113, byte(20+i)),
			})
			sendMsg(pc, from, m)
		}
		// Not a response (QR=0).
		sendMsg(pc, from, req)
		p := pp.Load()
		countedAll.Store(eventually(func() bool {
			return p.dropped(dropUnsolicited) == 1 && p.dropped(dropMismatch) == 3 && p.dropped(dropMalformed) == 1
		}))
		// The real answer, its name in other case (answers may do that).
		genuine := answerA("192.0.2.99")(req)
		genuine.Question[0].Name = strings.ToUpper(genuine.Question[0].Name)
		sendMsg(pc, from, genuine)
	})
	p, tr := newTestPool(t, addr, 1)
	pp.Store(p)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	resp, err := ask(ctx, tr, "www.example.org", dns.TypeA, 4242)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Answer) != 1 || firstA(t, resp) != "192.0.2.99" {
		t.Errorf("answer %v, want only the real 192.0.2.99", resp.Answer)
	}
	if !countedAll.Load() {
		t.Errorf("drops unsolicited %v mismatch %v malformed %v, want 1, 3, 1",
			p.dropped(dropUnsolicited), p.dropped(dropMismatch), p.dropped(dropMalformed))
	}
	if n := p.outstanding(); n != 0 {
		t.Errorf("%d queries still outstanding", n)
	}
}

// TestUDPPoolMismatchOnlyFailsAtTimeout: an upstream answering with the
// query's ID but another question does not end the query early (the real
// answer may follow); at the timeout the failure reads as a mismatch.
func TestUDPPoolMismatchOnlyFailsAtTimeout(t *testing.T) {
	addr := rawUDPServer(t, func(pc net.PacketConn, from net.Addr, req *dns.Msg) {
		other := req.Copy()
		other.Question[0].Name = "evil.example."
		sendMsg(pc, from, answerA("203.0.113.66")(other))
	})
	p, tr := newTestPool(t, addr, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := ask(ctx, tr, "a.example", dns.TypeA, 1)
	if !errors.Is(err, errMismatch) {
		t.Errorf("error %v, want a mismatch", err)
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("failed after %v, before the timeout", d)
	}
	if got := p.dropped(dropMismatch); got != 1 {
		t.Errorf("mismatch drops %v, want 1", got)
	}
}

// TestUDPPoolMultiplexes: many concurrent queries, answered out of order
// after random delays, each get their own answer, over at most the pool's
// sockets.
func TestUDPPoolMultiplexes(t *testing.T) {
	var ports sync.Map
	var answering sync.WaitGroup
	addr := rawUDPServer(t, func(pc net.PacketConn, from net.Addr, req *dns.Msg) {
		ports.Store(from.(*net.UDPAddr).Port, true)
		var i int
		if _, err := fmt.Sscanf(req.Question[0].Name, "q%d.example.", &i); err != nil {
			return
		}
		answering.Add(1)
		time.AfterFunc(time.Duration(i%7)*time.Millisecond, func() {
			defer answering.Done()
			sendMsg(pc, from, answerA(fmt.Sprintf("10.0.%d.%d", i/256, i%256))(req))
		})
	})
	t.Cleanup(answering.Wait) // runs before the server closes
	r := newResolver(t, group1(Strict, 3*time.Second, addr))
	const workers, each = 32, 10
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range each {
				i := w*each + k
				resp, _, err := r.Forward(context.Background(), "", query(fmt.Sprintf("q%d.example", i), dns.TypeA), clientAddr)
				if err != nil {
					errs <- err
					return
				}
				want := fmt.Sprintf("10.0.%d.%d", i/256, i%256)
				if len(resp.Answer) != 1 || resp.Answer[0].(*dns.A).A.String() != want {
					errs <- fmt.Errorf("q%d: answer %v, want %s", i, resp.Answer, want)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	n := 0
	ports.Range(func(any, any) bool { n++; return true })
	slots := len(r.trs[0].(*udpTransport).pool.slots)
	if n == 0 || n > slots {
		t.Errorf("queries came from %d source ports, want 1 to %d", n, slots)
	}
}

// TestUDPPoolRotates: a socket is replaced after rotateQueries queries or
// rotateAge, so the source port keeps changing, and the retired socket
// closes.
func TestUDPPoolRotates(t *testing.T) {
	var mu sync.Mutex
	var ports []int
	addr := rawUDPServer(t, func(pc net.PacketConn, from net.Addr, req *dns.Msg) {
		mu.Lock()
		ports = append(ports, from.(*net.UDPAddr).Port)
		mu.Unlock()
		sendMsg(pc, from, answerA("192.0.2.1")(req))
	})
	p, tr := newTestPool(t, addr, 1)
	p.rotateQueries = 3
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	for i := range 9 {
		if _, err := ask(ctx, tr, "r.example", dns.TypeA, uint16(i)); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	for i := range 9 {
		same := ports[i] == ports[i/3*3]
		if !same {
			t.Errorf("query %d from port %d, its socket's first query from %d", i, ports[i], ports[i/3*3])
		}
		if i%3 == 0 && i > 0 && ports[i] == ports[i-1] {
			t.Errorf("query %d: socket not rotated after 3 queries", i)
		}
	}
	mu.Unlock()
	if !eventually(func() bool { p.mu.Lock(); defer p.mu.Unlock(); return len(p.live) == 1 }) {
		t.Error("retired sockets not closed")
	}

	p.rotateQueries = udpRotateQueries
	p.rotateAge = 50 * time.Millisecond
	if _, err := ask(ctx, tr, "r.example", dns.TypeA, 1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(60 * time.Millisecond)
	if _, err := ask(ctx, tr, "r.example", dns.TypeA, 2); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if a, b := ports[len(ports)-2], ports[len(ports)-1]; a == b {
		t.Errorf("port %d kept past rotateAge", a)
	}
	mu.Unlock()
}

// TestUDPPoolIDCollision: two queries sent with the same ID at once on one
// socket go out with different IDs and each gets its own answer.
func TestUDPPoolIDCollision(t *testing.T) {
	ids := make(chan uint16, 2)
	var held []func()
	addr := rawUDPServer(t, func(pc net.PacketConn, from net.Addr, req *dns.Msg) {
		ids <- req.Id
		ip := "192.0.2.1"
		if req.Question[0].Name == "b.example." {
			ip = "192.0.2.2"
		}
		held = append(held, func() { sendMsg(pc, from, answerA(ip)(req)) })
		if len(held) == 2 { // answer once both are outstanding
			for _, f := range held {
				f()
			}
		}
	})
	_, tr := newTestPool(t, addr, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	got := make([]string, 2)
	for i, name := range []string{"a.example", "b.example"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := ask(ctx, tr, name, dns.TypeA, 7)
			if err != nil {
				t.Error(err)
				return
			}
			got[i] = resp.Answer[0].(*dns.A).A.String()
		}()
	}
	wg.Wait()
	if got[0] != "192.0.2.1" || got[1] != "192.0.2.2" {
		t.Errorf("answers %v", got)
	}
	if a, b := <-ids, <-ids; a == b {
		t.Errorf("both queries went out with ID %d", a)
	}
}

// TestUDPPoolBounded: a socket holds at most maxPending queries; with every
// socket full the pool refuses and the transport sends from a fresh socket.
// Queries that time out leave nothing outstanding, and their late answers
// are dropped.
func TestUDPPoolBounded(t *testing.T) {
	var mu sync.Mutex
	var held []func()
	addr := rawUDPServer(t, func(pc net.PacketConn, from net.Addr, req *dns.Msg) {
		if strings.HasPrefix(req.Question[0].Name, "now.") {
			sendMsg(pc, from, answerA("192.0.2.5")(req))
			return
		}
		mu.Lock()
		held = append(held, func() { sendMsg(pc, from, answerA("192.0.2.6")(req)) })
		mu.Unlock()
	})
	p, tr := newTestPool(t, addr, 1)
	p.maxPending = 2
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			_, err := ask(ctx, tr, fmt.Sprintf("held%d.example", i), dns.TypeA, uint16(i))
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("held query: %v, want a timeout", err)
			}
		}()
	}
	if !eventually(func() bool { return p.outstanding() == 2 }) {
		t.Fatal("held queries not outstanding")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	b := newBufPool().fill(make([]byte, 12))
	b.q[5] = 1 // a header alone is enough to be refused before sending
	if _, err := p.exchange(ctx, b.q, &b.a); !errors.Is(err, errPoolBusy) {
		t.Errorf("full pool: %v, want errPoolBusy", err)
	}
	if resp, err := ask(ctx, tr, "now.example", dns.TypeA, 9); err != nil || firstA(t, resp) != "192.0.2.5" {
		t.Errorf("query past a full pool: %v %v", resp, err)
	}
	wg.Wait()
	if n := p.outstanding(); n != 0 {
		t.Errorf("%d queries outstanding after their timeout", n)
	}
	mu.Lock()
	for _, f := range held {
		f()
	}
	mu.Unlock()
	// Each datagram of a held query is answered late: two, or more when
	// the queries were sent again after their RTO.
	mu.Lock()
	want := float64(len(held))
	mu.Unlock()
	if !eventually(func() bool { return p.dropped(dropLate) == want }) {
		t.Errorf("late answers: %v late drops, want %v", p.dropped(dropLate), want)
	}
	if got := p.dropped(dropUnsolicited); got != 0 {
		t.Errorf("%v unsolicited drops, want 0", got)
	}
}

// TestUDPPoolClose: closing the pool ends waiting queries at once and
// stops every reader.
func TestUDPPoolClose(t *testing.T) {
	addr := rawUDPServer(t, func(net.PacketConn, net.Addr, *dns.Msg) {})
	p, tr := newTestPool(t, addr, 2)
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := ask(ctx, tr, "c.example", dns.TypeA, 1)
		done <- err
	}()
	if !eventually(func() bool { return p.outstanding() == 1 }) {
		t.Fatal("query not outstanding")
	}
	_ = tr.close() // waits for the readers
	select {
	case err := <-done:
		if !errors.Is(err, errClosed) {
			t.Errorf("error %v, want errClosed", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("query still waiting after close")
	}
	p.mu.Lock()
	live := len(p.live)
	p.mu.Unlock()
	if live != 0 {
		t.Errorf("%d sockets open after close", live)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := ask(ctx, tr, "c.example", dns.TypeA, 2); !errors.Is(err, errClosed) {
		t.Errorf("query after close: %v, want errClosed", err)
	}
}

// TestUDPPoolPortUnreachable: an upstream port with nothing listening fails
// the query at once (ICMP port unreachable), not at the timeout.
func TestUDPPoolPortUnreachable(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := pc.LocalAddr().String()
	pc.Close()
	good := startUDP(t, answerA("192.0.2.30"))
	r := newResolver(t, group1(Strict, 2*time.Second, closed, good))
	for i := range 3 {
		start := time.Now()
		resp, up, err := r.Forward(context.Background(), "", query("u.example", dns.TypeA), clientAddr)
		if err != nil || up != good || firstA(t, resp) != "192.0.2.30" {
			t.Fatalf("query %d: %v from %s: %v", i, resp, up, err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("query %d took %v: the refused port waited for the timeout", i, d)
		}
	}
	if got := errorCount(t, r, DefaultGroup, closed, reasonNetwork); got != 3 {
		t.Errorf("network errors %v, want 3", got)
	}
}

func TestSameQuestion(t *testing.T) {
	pack := func(name string, qtype, qclass uint16, response bool) []byte {
		m := new(dns.Msg)
		m.Question = []dns.Question{{Name: name, Qtype: qtype, Qclass: qclass}}
		m.Response = response
		b, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	q := pack("www.Example.org.", dns.TypeHTTPS, dns.ClassINET, false) // type 65 is 'A' on the wire
	for _, tc := range []struct {
		name string
		a    []byte
		want bool
	}{
		{"same", pack("www.Example.org.", dns.TypeHTTPS, dns.ClassINET, true), true},
		{"other case", pack("WWW.example.ORG.", dns.TypeHTTPS, dns.ClassINET, true), true},
		{"type folded", pack("www.example.org.", 97, dns.ClassINET, true), false}, // 97 is 'a'
		{"other type", pack("www.example.org.", dns.TypeA, dns.ClassINET, true), false},
		{"other class", pack("www.example.org.", dns.TypeHTTPS, dns.ClassCHAOS, true), false},
		{"other name", pack("www.example.com.", dns.TypeHTTPS, dns.ClassINET, true), false},
		{"longer name", pack("www.example.org.x.", dns.TypeHTTPS, dns.ClassINET, true), false},
		{"shorter name", pack("example.org.", dns.TypeHTTPS, dns.ClassINET, true), false},
		{"truncated", pack("www.example.org.", dns.TypeHTTPS, dns.ClassINET, true)[:20], false},
		{"header only", make([]byte, 12), false},
	} {
		if got := sameQuestion(q, tc.a); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	two := pack("www.example.org.", dns.TypeHTTPS, dns.ClassINET, true)
	two[5] = 2
	if sameQuestion(q, two) {
		t.Error("two questions matched")
	}
}

func FuzzSameQuestion(f *testing.F) {
	m := new(dns.Msg)
	m.SetQuestion("www.example.org.", dns.TypeA)
	q, _ := m.Pack()
	f.Add(q)
	f.Add(q[:14])
	f.Fuzz(func(t *testing.T, a []byte) {
		_ = sameQuestion(q, a) // must not panic
		_ = sameQuestion(a, q)
	})
}

// TestUDPPoolFollowsBootstrap: when the bootstrap answer for a named
// upstream changes, new queries leave from sockets connected to the new
// address.
func TestUDPPoolFollowsBootstrap(t *testing.T) {
	boot := &bootServer{}
	boot.ttl.Store(1)
	boot.ip.Store("127.0.0.1")
	bootAddr := startUDP(t, boot.respond)
	up := startUDP(t, answerA("192.0.2.61"))
	_, port, _ := net.SplitHostPort(up)
	r := newResolver(t, Config{
		Groups:    map[string]GroupConfig{DefaultGroup: {Servers: []string{"dns.test:" + port}, Strategy: Strict, Timeout: time.Second}},
		Bootstrap: []string{bootAddr},
	})
	if _, _, err := r.Forward(context.Background(), "", query("f.example", dns.TypeA), clientAddr); err != nil {
		t.Fatal(err)
	}
	p := r.trs[0].(*udpTransport).pool
	remotes := func() (out []string) {
		for i := range p.slots {
			if s := p.slots[i].Load(); s != nil {
				out = append(out, s.remote.Addr().String())
			}
		}
		return out
	}
	if got := remotes(); len(got) != 1 || got[0] != "127.0.0.1" {
		t.Fatalf("sockets connected to %v, want [127.0.0.1]", got)
	}
	boot.ip.Store("127.0.0.2") // nothing listens there: answers are refused
	boot.ttl.Store(300)
	time.Sleep(1100 * time.Millisecond)
	// Stale: still the old address, and a refresh in the background.
	if _, _, err := r.Forward(context.Background(), "", query("f.example", dns.TypeA), clientAddr); err != nil {
		t.Fatal(err)
	}
	if !eventually(func() bool { return cachedFresh(r, "dns.test") }) {
		t.Fatal("bootstrap entry not refreshed")
	}
	for range len(r.trs[0].(*udpTransport).pool.slots) { // every slot in turn
		_, _, _ = r.Forward(context.Background(), "", query("f.example", dns.TypeA), clientAddr)
	}
	for _, a := range remotes() {
		if a != "127.0.0.2" {
			t.Errorf("a socket still connected to %s after the address changed", a)
		}
	}
}
