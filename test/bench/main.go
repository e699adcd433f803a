// Command bench measures the data plane's UDP throughput against two
// reference responders in the same run, each server in its own process:
//
//   - auth:  our server answering from a 10,000-record zone (fast path), its
//     names asked in a shuffled order (test/benchzone), as by bench-peers
//   - authlog: auth with the query log on (dnslog -> querylog.Writer ->
//     SQLite in a temporary directory), the writer sharing the server's
//     core; the child prints rows queued and dropped on stderr
//   - auth1: the same as auth with DisableUDPBatch (one syscall per datagram, the
//     read loop before recvmmsg/sendmmsg)
//   - cache: our server answering cache hits (10,000 names, warmed first)
//   - block: our server blocking 10,000 names drawn from a 1,000,000-name
//     domains list (NXDOMAIN), compiled into the policy table as a node
//     does (global list, builtin catalogue, safe search): the block
//     workload of hack/bench-peers.sh, for issue #27 item 2
//   - cachelog, blocklog: cache and block with the query log on, as authlog
//   - miss:  our server forwarding every query (unique names) to a loopback
//     upstream through dataplane/upstream, and caching the answer
//   - miekg: miekg/dns's default dns.Server answering one fixed record
//   - plain: a plain UDP socket loop that parses the question by hand and
//     writes a prebuilt answer (one read and one write syscall per query)
//
// The server under test runs with GOMAXPROCS=1 pinned to CPU 0 (taskset),
// the load generator with GOMAXPROCS=1 on CPU 1, the loopback upstream of
// "miss" on CPU 1 too. The generator keeps -window queries in flight on each
// of -clients connected sockets and moves them with sendmmsg/recvmmsg, so
// the server is the bottleneck. Kinds run interleaved for -rounds rounds;
// the table gives medians and ratios to miekg and plain.
//
// Usage: go build -o svcbench ./test/bench && ./svcbench [-duration 2s] [-rounds 5]
//
// With -drive ADDR the generator drives a server it did not start (Knot,
// NSD, Unbound, dnsdist, CoreDNS or a node; hack/bench-peers.sh runs it
// after dnsperf on each row) with the queries of a dnsperf input file
// (-queries), for -duration after a 300 ms warm-up, and prints one line:
// answers per second, the CPU share of the processes -pids names (the
// server and its children) and of the generator, and answers per server
// core-second (issue #27 item 1: the same comparison as dnsperf's, by a
// generator that saturates the server first).
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/dataplane/cache"
	"github.com/svcdns/svc/dataplane/policy"
	"github.com/svcdns/svc/dataplane/upstream"
	"github.com/svcdns/svc/internal/dnslog"
	"github.com/svcdns/svc/internal/querylog"
	"github.com/svcdns/svc/test/benchchild"
	"github.com/svcdns/svc/test/benchlist"
	"github.com/svcdns/svc/test/benchzone"
)

// cacheNames is as many as the block and auth workloads ask (and as
// hack/bench-peers.sh CACHE_NAMES), so item 2 compares equal working sets.
const cacheNames = 10000

var kinds = []string{"auth", "authlog", "auth1", "cache", "cachelog", "block", "blocklog", "miss", "miekg", "plain"}

func main() {
	serve := flag.String("serve", "", "child mode: serve this kind and print its address")
	up := flag.String("upstream", "", "child mode: upstream address for cache/miss")
	profile := flag.String("cpuprofile", "", "child mode: write a CPU profile here")
	duration := flag.Duration("duration", 2*time.Second, "measured time per kind and round")
	rounds := flag.Int("rounds", 5, "rounds (kinds interleaved)")
	clients := flag.Int("clients", 4, "load generator sockets")
	window := flag.Int("window", 16, "queries in flight per socket")
	only := flag.String("kinds", strings.Join(kinds, ","), "kinds to run")
	profDir := flag.String("profile-dir", "", "write each server's CPU profile (last round) here")
	drive := flag.String("drive", "", "drive the server at this address (host:port) instead of starting ours")
	queries := flag.String("queries", "", "with -drive: a dnsperf input file (name TYPE per line)")
	pids := flag.String("pids", "", "with -drive: the server's process IDs, space-separated, for its CPU time")
	flag.Parse()
	if *drive != "" {
		repin()
		runtime.GOMAXPROCS(1)
		if err := driveServer(*drive, *queries, *pids, *duration, *clients, *window); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if *serve != "" {
		if err := child(*serve, *up, *profile); err != nil {
			fmt.Fprintln(os.Stderr, "serve:", err)
			os.Exit(1)
		}
		return
	}
	repin()
	runtime.GOMAXPROCS(1)
	if err := parent(strings.Split(*only, ","), *duration, *rounds, *clients, *window, *profDir); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// ---------------------------------------------------------------- parent

// spawn starts this binary as a server child with GOMAXPROCS=1, on cpu
// when taskset exists and cpu >= 0.
func spawn(cpu int, args ...string) (*benchchild.Child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	argv := append([]string{self}, args...)
	if ts, err := exec.LookPath("taskset"); err == nil && cpu >= 0 && cpus() > cpu {
		argv = append([]string{ts, "-c", fmt.Sprint(cpu)}, argv...)
	}
	return benchchild.Start(argv, append(os.Environ(), "GOMAXPROCS=1"))
}

// cpus is the machine's CPU count before repin narrowed our affinity.
func cpus() int {
	var n int
	if _, err := fmt.Sscan(os.Getenv("SVCBENCH_CPUS"), &n); err == nil && n > 0 {
		return n
	}
	return runtime.NumCPU()
}

// repin re-executes the load generator under taskset -c 1 (every thread
// of the process, not just the current one) when it can.
func repin() {
	if os.Getenv("SVCBENCH_PINNED") != "" || runtime.NumCPU() < 2 {
		return
	}
	ts, err := exec.LookPath("taskset")
	if err != nil {
		return
	}
	self, err := os.Executable()
	if err != nil {
		return
	}
	env := append(os.Environ(), "SVCBENCH_PINNED=1", fmt.Sprintf("SVCBENCH_CPUS=%d", runtime.NumCPU()))
	_ = syscall.Exec(ts, append([]string{ts, "-c", "1", self}, os.Args[1:]...), env)
}

func parent(only []string, d time.Duration, rounds, clients, window int, profDir string) error {
	pinned := os.Getenv("SVCBENCH_PINNED") != ""
	upstreamProc, err := spawn(1, "-serve", "plain")
	if err != nil {
		return err
	}
	defer upstreamProc.Stop(5 * time.Second)
	fmt.Printf("svcbench: %d CPUs, server GOMAXPROCS=1 on CPU 0, load GOMAXPROCS=1 (pinned to CPU 1: %v), %d sockets x %d in flight, %v x %d rounds\n",
		cpus(), pinned, clients, window, d, rounds)
	results := map[string][]float64{}
	perCPU := map[string][]float64{}
	for r := 0; r < rounds; r++ {
		for _, k := range only {
			args := []string{"-serve", k, "-upstream", upstreamProc.Addr}
			if profDir != "" && r == rounds-1 {
				args = append(args, "-cpuprofile", fmt.Sprintf("%s/%s.pprof", profDir, k))
			}
			p, err := spawn(0, args...)
			if err != nil {
				return err
			}
			var cpu0, cpu1, user0, user1 time.Duration
			qps, lost, err := load(p.Addr, k, nil, d, clients, window,
				func() { user0, cpu0 = cpuTimes(p.Pid()); cpu0 += user0 },
				func() { user1, cpu1 = cpuTimes(p.Pid()); cpu1 += user1 })
			p.Stop(5 * time.Second)
			if err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
			busy := (cpu1 - cpu0).Seconds() / d.Seconds()
			results[k] = append(results[k], qps)
			if busy > 0 {
				perCPU[k] = append(perCPU[k], qps/busy)
			}
			user := 0.0
			if cpu1 > cpu0 {
				user = float64(user1-user0) / float64(cpu1-cpu0)
			}
			fmt.Printf("round %d %-6s %10.0f qps  server CPU %3.0f%% (user %2.0f%%)  %10.0f q/CPU-s  (%d read timeouts)\n", r+1, k, qps, 100*busy, 100*user, qps/busy, lost)
		}
	}
	med, medCPU := median(results), median(perCPU)
	fmt.Printf("\n%-6s %10s %8s %8s   %12s %8s %8s   (median of %d rounds)\n", "kind", "qps", "/miekg", "/plain", "q/CPU-s", "/miekg", "/plain", rounds)
	for _, k := range only {
		fmt.Printf("%-6s %10.0f %8s %8s   %12.0f %8s %8s\n", k, med[k], ratio(med[k], med["miekg"]), ratio(med[k], med["plain"]),
			medCPU[k], ratio(medCPU[k], medCPU["miekg"]), ratio(medCPU[k], medCPU["plain"]))
	}
	// Per-round ratios show the spread under a shared machine's noise.
	if rm, ok := results["miekg"]; ok {
		for _, k := range []string{"auth", "cache"} {
			if _, ok := results[k]; !ok {
				continue
			}
			fmt.Printf("BenchmarkUDP/%s-vs-miekg %d %.2f ratio\n", k, rounds, med[k]/med["miekg"])
		}
		_ = rm
	}
	return nil
}

func median(m map[string][]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		slices.Sort(v)
		out[k] = v[len(v)/2]
	}
	return out
}

// cpuTime is the user+system CPU time of process pid so far (/proc).
func cpuTime(pid int) time.Duration {
	u, s := cpuTimes(pid)
	return u + s
}

// cpuTimes is the user and the system CPU time of process pid so far.
func cpuTimes(pid int) (user, sys time.Duration) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0
	}
	// Fields after the parenthesised command name; utime and stime are 14 and 15.
	s := string(b)
	s = s[strings.LastIndexByte(s, ')')+2:]
	f := strings.Fields(s)
	if len(f) < 13 {
		return 0, 0
	}
	var ut, st int64
	fmt.Sscan(f[11], &ut)
	fmt.Sscan(f[12], &st)
	return time.Duration(ut) * time.Second / 100, time.Duration(st) * time.Second / 100 // USER_HZ
}

func ratio(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

// driveServer is -drive: the generator against a server at addr that
// another program started, asking the queries of a dnsperf input file.
func driveServer(addr, file, pidList string, d time.Duration, clients, window int) error {
	pkts, err := readQueries(file)
	if err != nil {
		return err
	}
	var pids []int
	for _, f := range strings.Fields(pidList) {
		var p int
		if _, err := fmt.Sscan(f, &p); err != nil || p <= 0 {
			return fmt.Errorf("-pids: %q is not a process ID", f)
		}
		pids = append(pids, p)
	}
	srvCPU := func() (t time.Duration) {
		for _, p := range pids {
			t += cpuTime(p)
		}
		return t
	}
	var s0, s1, g0, g1 time.Duration
	var t0, t1 time.Time
	qps, lost, err := load(addr, "drive", pkts, d, clients, window,
		func() { s0, g0, t0 = srvCPU(), selfCPU(), time.Now() },
		func() { s1, g1, t1 = srvCPU(), selfCPU(), time.Now() })
	if err != nil {
		return err
	}
	wall := t1.Sub(t0).Seconds()
	busy := (s1 - s0).Seconds() / wall
	per := 0.0
	if busy > 0 {
		per = qps / busy
	}
	fmt.Printf("drive: %.0f answers/s, server CPU %.0f%%, generator CPU %.0f%%, %.0f answers per server core-second, %d read timeouts\n",
		qps, 100*busy, 100*(g1-g0).Seconds()/wall, per, lost)
	return nil
}

// readQueries packs each line of a dnsperf input file ("name TYPE") as a
// query with a recursion-desired flag, as dnsperf sends it.
func readQueries(file string) ([][]byte, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var pkts [][]byte
	for n, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		qt := dns.TypeA
		if len(f) > 1 {
			t, ok := dns.StringToType[strings.ToUpper(f[1])]
			if !ok {
				return nil, fmt.Errorf("%s:%d: unknown type %q", file, n+1, f[1])
			}
			qt = t
		}
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(f[0]), qt)
		m.Id = uint16(len(pkts))
		p, err := m.Pack()
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", file, n+1, err)
		}
		pkts = append(pkts, p)
	}
	if len(pkts) == 0 {
		return nil, fmt.Errorf("%s: no queries", file)
	}
	return pkts, nil
}

// selfCPU is this process's user+system CPU time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// load drives addr for warm-up plus d and returns answers per second. pkts,
// when set, are the queries (kind "drive": NOERROR and NXDOMAIN answers
// are both right, as each server blocks its own way); else kind picks them.
func load(addr, kind string, pkts [][]byte, d time.Duration, clients, window int, mark0, mark1 func()) (float64, int64, error) {
	raddr, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return 0, 0, err
	}
	warm := 300 * time.Millisecond
	if strings.HasPrefix(kind, "cache") {
		// Fill the cache: every name once, answered through the upstream.
		if err := warmCache(addr); err != nil {
			return 0, 0, err
		}
	}
	var (
		counting atomic.Bool
		stop     atomic.Bool
		total    atomic.Int64
		bad      atomic.Int64
		lost     atomic.Int64
		wg       sync.WaitGroup
		firstErr error
		errOnce  sync.Once
	)
	for w := 0; w < clients; w++ {
		c, err := net.DialUDP("udp", nil, raddr)
		if err != nil {
			return 0, 0, err
		}
		_ = c.SetReadBuffer(4 << 20)
		_ = c.SetWriteBuffer(4 << 20)
		g := newGen(c, kind, pkts, w, window)
		if kind == "miss" {
			g.timeout = time.Second // answers wait for the upstream
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			n, b, err := g.run(&stop, &counting)
			total.Add(n)
			bad.Add(b)
			lost.Add(g.timeouts)
			if err != nil {
				errOnce.Do(func() { firstErr = err })
			}
		}()
	}
	time.Sleep(warm)
	mark0()
	counting.Store(true)
	start := time.Now()
	time.Sleep(d)
	counting.Store(false)
	el := time.Since(start)
	mark1()
	stop.Store(true)
	wg.Wait()
	if firstErr != nil {
		return 0, 0, firstErr
	}
	if b := bad.Load(); b > 0 {
		if kind == "drive" {
			return 0, 0, fmt.Errorf("%d answers were neither NOERROR nor NXDOMAIN", b)
		}
		return 0, 0, fmt.Errorf("%d answers were not NOERROR with one answer record", b)
	}
	return float64(total.Load()) / el.Seconds(), lost.Load(), nil
}

func warmCache(addr string) error {
	c := &dns.Client{Timeout: 2 * time.Second}
	for i := 0; i < cacheNames; i++ {
		m := new(dns.Msg)
		m.SetQuestion(fmt.Sprintf("c%d.example.net.", i), dns.TypeA)
		if _, _, err := c.Exchange(m, addr); err != nil {
			return fmt.Errorf("warm cache: %w", err)
		}
	}
	return nil
}

// gen is one load socket: up to window queries in flight, sent and received
// in batches with sendmmsg/recvmmsg.
type gen struct {
	c        *net.UDPConn
	rc       syscall.RawConn
	window   int
	pkts     [][]byte // prebuilt queries, rotated
	next     int
	unique   bool // write a fresh name into each query (cache misses)
	timeouts int64
	timeout  time.Duration
	seq      uint64
	rcode    byte // the answers' expected RCODE; NOERROR answers must carry a record
	drive    bool // -drive: every answer must be NOERROR or NXDOMAIN (servers block their own way)

	sh   []unix.Mmsghdr
	siov []unix.Iovec
	sbuf [][]byte
	ns   int
	sent int

	rh   []unix.Mmsghdr
	riov []unix.Iovec
	rbuf [][]byte
	got  int
	err  error
	sfn  func(uintptr) bool
	rfn  func(uintptr) bool
}

func newGen(c *net.UDPConn, kind string, pkts [][]byte, w, window int) *gen {
	rc, _ := c.SyscallConn()
	g := &gen{c: c, rc: rc, window: window, timeout: 50 * time.Millisecond}
	switch kind {
	case "drive":
		g.pkts, g.drive = pkts, true
	case "cache", "cachelog":
		for i := 0; i < cacheNames; i++ {
			g.pkts = append(g.pkts, query(fmt.Sprintf("c%d.example.net.", i), uint16(i)))
		}
	case "block", "blocklog":
		// The same 10,000 names for every socket and round, as dnsperf's
		// query file is the same for every server.
		for k, name := range benchlist.Query() {
			g.pkts = append(g.pkts, query(name, uint16(k)))
		}
		g.rcode = dns.RcodeNameError
	case "miss":
		g.unique = true
		g.seq = uint64(w) << 40
		g.pkts = [][]byte{query("m0000000000000.example.net.", 1)}
	default:
		// In dnsperf's shuffled order: asked in the order they were
		// compiled, the zone's nodes were read in address order, and the
		// CPU's own prefetchers hid the misses a real load pays.
		for k, name := range benchzone.Query() {
			g.pkts = append(g.pkts, query(name, uint16(k)))
		}
	}
	g.next = (w * 7919) % len(g.pkts)
	g.sh, g.siov, g.sbuf = make([]unix.Mmsghdr, window), make([]unix.Iovec, window), make([][]byte, window)
	g.rh, g.riov, g.rbuf = make([]unix.Mmsghdr, window), make([]unix.Iovec, window), make([][]byte, window)
	for i := range window {
		g.sbuf[i] = make([]byte, 512)
		g.rbuf[i] = make([]byte, 1500)
		g.riov[i].Base = &g.rbuf[i][0]
		g.riov[i].SetLen(len(g.rbuf[i]))
		g.rh[i].Hdr.Iov = &g.riov[i]
		g.rh[i].Hdr.SetIovlen(1)
		g.sh[i].Hdr.Iov = &g.siov[i]
		g.sh[i].Hdr.SetIovlen(1)
	}
	g.sfn, g.rfn = g.send, g.recv
	return g
}

func query(name string, id uint16) []byte {
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	m.Id = id
	b, err := m.Pack()
	if err != nil {
		panic(err)
	}
	return b
}

func (g *gen) run(stop, counting *atomic.Bool) (n, bad int64, err error) {
	need := g.window
	checked := 0
	for !stop.Load() {
		if need > 0 {
			g.fill(need)
			if err := g.rc.Write(g.sfn); err != nil {
				return n, bad, err
			}
		}
		_ = g.c.SetReadDeadline(time.Now().Add(g.timeout))
		g.got, g.err = 0, nil
		err := g.rc.Read(g.rfn)
		if err == nil {
			err = g.err
		}
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				need = g.window // assume the window was lost; refill it
				g.timeouts++
				continue
			}
			return n, bad, err
		}
		if g.drive {
			// Every answer: a server that answers SERVFAIL or REFUSED
			// quickly must not look fast.
			for i := 0; i < g.got; i++ {
				b := g.rbuf[i][:g.rh[i].Len]
				if len(b) < 12 || b[3]&0xF != dns.RcodeSuccess && b[3]&0xF != dns.RcodeNameError {
					bad++
				}
			}
		} else if checked < 16 {
			for i := 0; i < g.got && checked < 16; i++ {
				b := g.rbuf[i][:g.rh[i].Len]
				if len(b) < 12 || b[3]&0xF != g.rcode || (g.rcode == dns.RcodeSuccess && binary.BigEndian.Uint16(b[6:]) == 0) {
					bad++
				}
				checked++
			}
		}
		if counting.Load() {
			n += int64(g.got)
		}
		need = g.got
	}
	return n, bad, nil
}

// fill prepares k queries in the send batch.
func (g *gen) fill(k int) {
	for i := 0; i < k; i++ {
		var p []byte
		if g.unique {
			b := g.sbuf[i][:len(g.pkts[0])]
			copy(b, g.pkts[0])
			g.seq++
			// Overwrite the 13 digits after "m" with the sequence number.
			v := g.seq
			for j := 12 + 1 + 1 + 12; j >= 12+1+1; j-- {
				b[j] = byte('0' + v%10)
				v /= 10
			}
			binary.BigEndian.PutUint16(b, uint16(g.seq))
			p = b
		} else {
			p = g.pkts[g.next]
			g.next++
			if g.next == len(g.pkts) {
				g.next = 0
			}
		}
		g.siov[i].Base = &p[0]
		g.siov[i].SetLen(len(p))
	}
	g.ns, g.sent = k, 0
}

func (g *gen) send(fd uintptr) bool {
	for g.sent < g.ns {
		n, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&g.sh[g.sent])), uintptr(g.ns-g.sent), 0, 0, 0)
		switch errno {
		case 0:
			g.sent += int(n)
		case unix.EAGAIN:
			return false
		case unix.EINTR:
		default:
			g.sent++ // ECONNREFUSED and friends: that query is lost
		}
	}
	return true
}

func (g *gen) recv(fd uintptr) bool {
	n, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&g.rh[0])), uintptr(len(g.rh)), 0, 0, 0)
	switch errno {
	case 0:
		g.got = int(n)
		return true
	case unix.EAGAIN, unix.EINTR:
		return false
	case unix.ECONNREFUSED:
		return false
	}
	g.err = errno
	return true
}

// ---------------------------------------------------------------- children

func child(kind, up, profile string) error {
	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	var stop func()
	var addr string
	var err error
	switch kind {
	case "auth", "authlog", "auth1", "cache", "cachelog", "block", "blocklog", "miss":
		addr, stop, err = serveOurs(kind, up)
	case "miekg":
		addr, stop, err = serveMiekg()
	case "plain":
		addr, stop, err = servePlain()
	default:
		err = fmt.Errorf("unknown kind %q", kind)
	}
	if err != nil {
		return err
	}
	fmt.Println(addr)
	_, _ = io.Copy(io.Discard, os.Stdin) // the parent closes stdin to stop us
	stop()
	return nil
}

func serveOurs(kind, up string) (string, func(), error) {
	cfg := dataplane.Config{
		Node:      "bench",
		Listeners: []dataplane.ListenerConfig{{Address: "127.0.0.1:0", Protocols: []string{"udp"}}},
		Sockets:   1,
	}
	in := dataplane.SnapshotInput{Version: "bench"}
	cfg.DisableUDPBatch = kind == "auth1"
	var opts dataplane.Options
	var closeLog func()
	if strings.HasSuffix(kind, "log") {
		// The query log on, as a node runs it: dnslog -> querylog.Writer ->
		// SQLite in a temporary data directory, on the server's core.
		dir, err := os.MkdirTemp("", "svcbench-querylog-")
		if err != nil {
			return "", nil, err
		}
		qc := querylog.DefaultConfig()
		qc.DataDir, qc.Node = dir, "bench"
		w, err := querylog.Open(context.Background(), qc, querylog.Options{})
		if err != nil {
			return "", nil, err
		}
		lg := dnslog.New(w) // as internal/node wires it
		opts.QueryLogger = lg
		closeLog = func() {
			_ = lg.Close()
			_ = w.Close()
			fmt.Fprintf(os.Stderr, "%s: %.0f rows written, %.0f+%d dropped\n", kind, w.Written(), w.Dropped(), lg.Dropped())
			_ = os.RemoveAll(dir)
		}
	}
	if kind == "auth" || kind == "auth1" || kind == "authlog" {
		tab, err := benchzone.Table(time.Now())
		if err != nil {
			return "", nil, err
		}
		in.Authority = tab
	} else {
		cfg.Cache = cache.DefaultConfig()
		ucfg := upstream.DefaultConfig()
		ucfg.Groups = map[string]upstream.GroupConfig{upstream.DefaultGroup: {Servers: []string{up}}}
		ucfg.Bootstrap = []string{up}
		res, err := upstream.New(ucfg, slog.New(slog.DiscardHandler), nil)
		if err != nil {
			return "", nil, err
		}
		in.Forwarder, in.Router = res, res
	}
	if strings.HasPrefix(kind, "block") {
		tab, err := millionTable()
		if err != nil {
			return "", nil, err
		}
		in.Blocker, in.Identifier, in.BlockingEnabled = tab, tab.Groups(), true
	}
	s, err := dataplane.New(cfg, opts)
	if err != nil {
		return "", nil, err
	}
	s.Swap(dataplane.NewSnapshot(in))
	if err := s.Start(context.Background()); err != nil {
		return "", nil, err
	}
	return s.UDPAddrs()[0].String(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		if closeLog != nil {
			closeLog()
		}
	}, nil
}

// millionTable is test/benchlist's table, with the list's text collected
// before the load starts.
func millionTable() (*policy.Table, error) {
	tab, err := benchlist.Table(context.Background())
	runtime.GC()
	return tab, err
}

func serveMiekg() (string, func(), error) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	rr, err := dns.NewRR("www.example.com. 3600 IN A 192.0.2.1")
	if err != nil {
		return "", nil, err
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		m.Authoritative = true
		m.Answer = []dns.RR{rr}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	return pc.LocalAddr().String(), func() { _ = srv.Shutdown() }, nil
}

// servePlain is the floor of what any Go responder pays per query: one
// ReadFromUDPAddrPort, a hand parse of the question, one WriteToUDPAddrPort
// of a prebuilt answer (A 192.0.2.1, TTL 300, name compressed to the question).
func servePlain() (string, func(), error) {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return "", nil, err
	}
	_ = c.SetReadBuffer(4 << 20)
	go func() {
		in := make([]byte, 1500)
		out := make([]byte, 0, 1500)
		rr := []byte{0xC0, 12, 0, 1, 0, 1, 0, 0, 1, 44, 0, 4, 192, 0, 2, 1}
		for {
			n, addr, err := c.ReadFromUDPAddrPort(in)
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			q := in[:n]
			if n < 12 || q[2]&0x80 != 0 {
				continue
			}
			i := 12
			for i < n && q[i] != 0 {
				i += int(q[i]) + 1
			}
			i += 5 // root label, type, class
			if i > n {
				continue
			}
			out = append(out[:0], q[:i]...)
			out[2] = 0x84 | q[2]&0x01 // QR AA RD
			out[3] = 0
			binary.BigEndian.PutUint16(out[4:], 1)
			binary.BigEndian.PutUint16(out[6:], 1)
			binary.BigEndian.PutUint32(out[8:], 0)
			out = append(out, rr...)
			_, _ = c.WriteToUDPAddrPort(out, addr)
		}
	}()
	return c.LocalAddr().String(), func() { _ = c.Close() }, nil
}
