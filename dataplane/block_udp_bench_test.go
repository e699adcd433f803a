package dataplane_test

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/dataplane/cache"
	"github.com/svcdns/svc/dataplane/policy"
	"github.com/svcdns/svc/test/benchlist"
)

// The block and cache workloads of hack/bench-peers.sh: the names of
// test/benchlist drawn from its 1,000,000-name list answered NXDOMAIN by
// the global policy, and 10,000 cached names (as many as bench-peers asks).
const benchCacheNames = 10_000

var (
	blockTableOnce sync.Once
	blockTable     *policy.Table
	blockTableErr  error
)

// millionTable compiles the 1M-name list once per test binary (about a
// second).
func millionTable(tb testing.TB) *policy.Table {
	blockTableOnce.Do(func() { blockTable, blockTableErr = benchlist.Table(context.Background()) })
	if blockTableErr != nil {
		tb.Fatal(blockTableErr)
	}
	return blockTable
}

// answerAll answers every A query with one record, as the CoreDNS upstream
// of bench-peers does.
type answerAll struct{}

func (answerAll) Forward(_ context.Context, _ string, req *dns.Msg, _ netip.Addr) (*dns.Msg, string, error) {
	m := new(dns.Msg)
	m.SetReply(req)
	m.RecursionAvailable = true
	m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: req.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 3600},
		A: []byte{192, 0, 2, 1}}}
	return m, "127.0.0.1:53", nil
}

// countLog is a query logger that takes the record and drops it: the log
// stage builds the record for every answer, as on a node with the query log on.
type countLog struct{ n int }

func (l *countLog) Log(dataplane.QueryRecord) { l.n++ }

func packQuery(tb testing.TB, name string, id uint16) []byte {
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	m.Id = id
	b, err := m.Pack()
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// blockBench is the server with the 1M-name table and a warm cache, and
// the queries of both workloads.
type blockBench struct {
	srv          *dataplane.Server
	addr         netip.AddrPort
	block, cache [][]byte
}

func newBlockBench(b *testing.B) *blockBench {
	tab := millionTable(b)
	cc := cache.DefaultConfig() // 200,000 entries: every cached name stays
	srv := startUDPBench(b, cc, dataplane.NewSnapshot(dataplane.SnapshotInput{
		Version: "bench", Blocker: tab, Identifier: tab.Groups(), BlockingEnabled: true, Forwarder: answerAll{},
	}))
	bb := &blockBench{srv: srv, addr: srv.UDPAddrs()[0]}
	for k, name := range benchlist.Query() {
		bb.block = append(bb.block, packQuery(b, name, uint16(k)))
	}
	for i := range benchCacheNames {
		bb.cache = append(bb.cache, packQuery(b, fmt.Sprintf("c%d.cache.up.", i), uint16(i)))
	}
	// Warm the cache: every name once through the forwarder.
	out := make([]byte, 0, 4096)
	for _, p := range bb.cache {
		var ok bool
		out, ok = srv.ServeWire(p, netip.MustParseAddrPort("127.0.0.1:5353"), dataplane.TransportUDP, out[:0])
		if !ok || len(out) < 12 || out[3]&0xF != 0 || out[7] != 1 {
			b.Fatalf("warming the cache: answer % x", out)
		}
	}
	return bb
}

// startUDPBench starts a node's data plane on one loopback UDP socket with
// cache config cc, serving snap and logging every answer to a countLog as
// on a node with the query log on; it is shut down when b ends.
func startUDPBench(b *testing.B, cc cache.Config, snap *dataplane.Snapshot) *dataplane.Server {
	srv, err := dataplane.New(dataplane.Config{
		Node:      "bench",
		Listeners: []dataplane.ListenerConfig{{Address: "127.0.0.1:0", Protocols: []string{"udp"}}},
		Sockets:   1,
		Cache:     cc,
	}, dataplane.Options{QueryLogger: &countLog{}})
	if err != nil {
		b.Fatal(err)
	}
	srv.Swap(snap)
	if err := srv.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return srv
}

// sample is the cost of one measured stretch of one workload.
type sample struct {
	answers       int64
	wall, cpu     time.Duration // cpu: the process's CPU time less the client thread's
	allocs, bytes uint64
}

func (s *sample) add(o sample) {
	s.answers += o.answers
	s.wall += o.wall
	s.cpu += o.cpu
	s.allocs += o.allocs
	s.bytes += o.bytes
}

func cpuClock(id int32) time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(id, &ts)
	return time.Duration(ts.Nano())
}

var heapSamples = []metrics.Sample{{Name: "/gc/heap/allocs:objects"}, {Name: "/gc/heap/allocs:bytes"}}

func heapAllocs() (objects, bytes uint64) {
	metrics.Read(heapSamples)
	return heapSamples[0].Value.Uint64(), heapSamples[1].Value.Uint64()
}

// udpClient keeps window queries in flight on one blocking socket with
// sendmmsg/recvmmsg from the calling goroutine's locked thread, so that its
// CPU time can be taken out of the process's (CLOCK_THREAD_CPUTIME_ID). It
// allocates nothing per query.
type udpClient struct {
	fd     int
	window int
	sh, rh []unix.Mmsghdr
	siov   []unix.Iovec
	riov   []unix.Iovec
	rbuf   [][]byte
	lost   int64
	bad    int64
}

func newUDPClient(tb testing.TB, addr netip.AddrPort, window int) *udpClient {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = unix.Close(fd) })
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20)
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 200_000})
	if err := unix.Connect(fd, &unix.SockaddrInet4{Port: int(addr.Port()), Addr: addr.Addr().As4()}); err != nil {
		tb.Fatal(err)
	}
	c := &udpClient{fd: fd, window: window, sh: make([]unix.Mmsghdr, window), rh: make([]unix.Mmsghdr, window),
		siov: make([]unix.Iovec, window), riov: make([]unix.Iovec, window), rbuf: make([][]byte, window)}
	for i := range window {
		c.rbuf[i] = make([]byte, 1500)
		c.riov[i].Base = &c.rbuf[i][0]
		c.riov[i].SetLen(1500)
		c.rh[i].Hdr.Iov = &c.riov[i]
		c.rh[i].Hdr.SetIovlen(1)
		c.sh[i].Hdr.Iov = &c.siov[i]
		c.sh[i].Hdr.SetIovlen(1)
	}
	return c
}

func (c *udpClient) send(pkts [][]byte, next *int, k int) {
	for i := range k {
		p := pkts[*next]
		*next = (*next + 1) % len(pkts)
		c.siov[i].Base = &p[0]
		c.siov[i].SetLen(len(p))
	}
	for sent := 0; sent < k; {
		n, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(c.fd), uintptr(unsafe.Pointer(&c.sh[sent])), uintptr(k-sent), 0, 0, 0)
		switch errno {
		case 0:
			sent += int(n)
		case unix.EINTR:
		default:
			sent++ // that query is lost; the read timeout refills the window
		}
	}
}

// recv waits for at least one answer and returns how many arrived; 0 on
// timeout. rcode is checked on every answer.
func (c *udpClient) recv(rcode byte) int {
	for {
		n, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(c.fd), uintptr(unsafe.Pointer(&c.rh[0])), uintptr(c.window), unix.MSG_WAITFORONE, 0, 0)
		switch errno {
		case 0:
			for i := range int(n) {
				b := c.rbuf[i][:c.rh[i].Len]
				if len(b) < 12 || b[3]&0xF != rcode {
					c.bad++
				}
			}
			return int(n)
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return 0
		}
		return 0
	}
}

// run answers n queries of pkts with window in flight and waits for the
// window to drain, so that stretches of different workloads do not overlap.
func (c *udpClient) run(pkts [][]byte, next *int, n int, rcode byte) sample {
	o0, b0 := heapAllocs()
	t0, p0, c0 := time.Now(), cpuClock(unix.CLOCK_PROCESS_CPUTIME_ID), cpuClock(unix.CLOCK_THREAD_CPUTIME_ID)
	inflight, got := 0, 0
	for got < n {
		if k := min(c.window-inflight, n-got-inflight); k > 0 {
			c.send(pkts, next, k)
			inflight += k
		}
		r := c.recv(rcode)
		if r == 0 {
			c.lost += int64(inflight)
			inflight = 0
			continue
		}
		got += r
		inflight -= r
	}
	wall, cpu := time.Since(t0), cpuClock(unix.CLOCK_PROCESS_CPUTIME_ID)-p0-(cpuClock(unix.CLOCK_THREAD_CPUTIME_ID)-c0)
	o1, b1 := heapAllocs()
	return sample{answers: int64(got), wall: wall, cpu: cpu, allocs: o1 - o0, bytes: b1 - b0}
}

// BenchmarkUDPBlock1MVsCacheHit (issue #27 item 2) answers b.N queries of
// each workload through the server's real UDP loop, alternating stretches
// of 2,048 answers: names from a 1,000,000-name block list (NXDOMAIN, the
// policy table the node compiles) and cache hits of 1,000 names. It
// reports, per answer of each, the server's CPU time (process CPU less the
// load thread's), the wall time and heap allocations, and the ratios
// blocked ÷ cached. The load thread runs in this process, so it shares the
// machine's cores with the server: compare ratios within one run.
func BenchmarkUDPBlock1MVsCacheHit(b *testing.B) {
	bb := newBlockBench(b)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c := newUDPClient(b, bb.addr, 32)
	var nb, nc int
	// A short warm-up of both, so the first stretch does not pay page faults.
	c.run(bb.block, &nb, 4096, dns.RcodeNameError)
	c.run(bb.cache, &nc, 4096, dns.RcodeSuccess)
	var blk, hit sample
	const stretch = 2048
	b.ResetTimer()
	for done := 0; done < b.N; done += stretch {
		n := min(stretch, b.N-done)
		blk.add(c.run(bb.block, &nb, n, dns.RcodeNameError))
		hit.add(c.run(bb.cache, &nc, n, dns.RcodeSuccess))
	}
	b.StopTimer()
	if c.bad > 0 {
		b.Fatalf("%d answers had the wrong rcode", c.bad)
	}
	reportPair(b, blk, hit)
	b.ReportMetric(float64(c.lost), "lost")
}

func reportPair(b *testing.B, blk, hit sample) {
	per := func(d time.Duration, s sample) float64 { return float64(d.Nanoseconds()) / float64(s.answers) }
	b.ReportMetric(per(blk.cpu, blk), "block-cpu-ns/ans")
	b.ReportMetric(per(hit.cpu, hit), "cache-cpu-ns/ans")
	b.ReportMetric(per(blk.cpu, blk)/per(hit.cpu, hit), "cpu-ratio")
	b.ReportMetric(per(blk.wall, blk), "block-ns/ans")
	b.ReportMetric(per(hit.wall, hit), "cache-ns/ans")
	b.ReportMetric(per(blk.wall, blk)/per(hit.wall, hit), "wall-ratio")
	b.ReportMetric(float64(blk.allocs)/float64(blk.answers), "block-allocs/ans")
	b.ReportMetric(float64(hit.allocs)/float64(hit.answers), "cache-allocs/ans")
	b.ReportMetric(float64(blk.bytes)/float64(blk.answers), "block-B/ans")
}

// BenchmarkServeWireBlock1MVsCacheHit is the same pair in process, through
// ServeWire without sockets: the pipeline's share of the cost.
func BenchmarkServeWireBlock1MVsCacheHit(b *testing.B) {
	bb := newBlockBench(b)
	client := netip.MustParseAddrPort("127.0.0.1:5353")
	out := make([]byte, 0, 4096)
	var blk, hit sample
	var nb, nc int
	one := func(pkts [][]byte, next *int, n int) sample {
		o0, b0 := heapAllocs()
		t0 := time.Now()
		c0 := cpuClock(unix.CLOCK_PROCESS_CPUTIME_ID)
		for range n {
			out, _ = bb.srv.ServeWire(pkts[*next], client, dataplane.TransportUDP, out[:0])
			*next = (*next + 1) % len(pkts)
		}
		wall, cpu := time.Since(t0), cpuClock(unix.CLOCK_PROCESS_CPUTIME_ID)-c0
		o1, b1 := heapAllocs()
		return sample{answers: int64(n), wall: wall, cpu: cpu, allocs: o1 - o0, bytes: b1 - b0}
	}
	one(bb.block, &nb, 4096)
	one(bb.cache, &nc, 4096)
	const stretch = 2048
	b.ResetTimer()
	for done := 0; done < b.N; done += stretch {
		n := min(stretch, b.N-done)
		blk.add(one(bb.block, &nb, n))
		hit.add(one(bb.cache, &nc, n))
	}
	b.StopTimer()
	reportPair(b, blk, hit)
}
