// Command flood measures the data plane under a flood of cache misses
// (issue #20 item 1): for -duration (20 s) one client (127.0.0.1, one /24)
// sends uncached random names as fast as -rate allows to a server whose
// default upstream never answers, while a second client (127.0.1.1,
// another /24) asks one uncached name a second under good.example., which
// a responsive upstream group answers. It reports the server's peak RSS
// (VmHWM, the goal is under 256 MB), its RSS -after the flood, and the
// second client's answered share (the goal is 100%).
//
// The server runs in a child process (this binary with -serve), so its RSS
// is its own; the upstreams and clients run in the parent. With -baseline
// BIN, BIN (this harness built at an older commit, see hack/bench.sh) runs
// the same scenario first and the table gives both and their ratio.
//
// Usage: go build -o flood ./test/flood && ./flood [-duration 20s] [-rate 50000] [-baseline old-flood]
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/dataplane/cache"
	"github.com/svcdns/svc/dataplane/upstream"
	"github.com/svcdns/svc/test/benchchild"
)

func main() {
	serve := flag.Bool("serve", false, "child mode: run the server and print its address")
	silent := flag.String("silent", "", "child mode: the silent upstream")
	good := flag.String("good", "", "child mode: the responsive upstream")
	duration := flag.Duration("duration", 20*time.Second, "flood duration")
	after := flag.Duration("after", 30*time.Second, "how long RSS is watched after the flood")
	rate := flag.Int("rate", 50000, "flood queries per second (at most)")
	baseline := flag.String("baseline", "", "a flood binary of an older commit to run first")
	flag.Parse()
	if *serve {
		if err := child(*silent, *good); err != nil {
			fmt.Fprintln(os.Stderr, "serve:", err)
			os.Exit(1)
		}
		return
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "flood:", err)
		os.Exit(1)
	}
	var results []result
	bins := []string{self}
	names := []string{"current"}
	if *baseline != "" {
		bins = []string{*baseline, self}
		names = []string{"baseline", "current"}
	}
	for i, bin := range bins {
		r, err := run(bin, *duration, *after, *rate)
		if err != nil {
			fmt.Fprintln(os.Stderr, "flood:", names[i]+":", err)
			os.Exit(1)
		}
		r.name = names[i]
		results = append(results, r)
	}
	fmt.Printf("%-9s %12s %14s %13s %14s %16s %12s\n", "server", "flood sent", "flood answered", "kernel drops", "peak RSS (MB)", "RSS after (MB)", "2nd client")
	for _, r := range results {
		fmt.Printf("%-9s %12d %14d %13d %14.0f %16.0f %6d/%d %3.0f%%\n", r.name, r.sent, r.answered, r.kernelDrops, mb(r.peak), mb(r.rssAfter), r.ok, r.asked, 100*float64(r.ok)/float64(max(r.asked, 1)))
	}
	if len(results) == 2 {
		b, c := results[0], results[1]
		fmt.Printf("ratio current/baseline: peak RSS %.2f, RSS after %.2f, 2nd client answered %.0f%% vs %.0f%%\n",
			float64(c.peak)/float64(max(b.peak, 1)), float64(c.rssAfter)/float64(max(b.rssAfter, 1)),
			100*float64(c.ok)/float64(max(c.asked, 1)), 100*float64(b.ok)/float64(max(b.asked, 1)))
	}
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

type result struct {
	name           string
	sent, answered int64
	peak, rssAfter int64
	ok, asked      int
	kernelDrops    int64
}

// run floods one server binary and measures it.
func run(bin string, d, after time.Duration, rate int) (result, error) {
	var r result
	silent, stopSilent, err := silentUpstream()
	if err != nil {
		return r, err
	}
	defer stopSilent()
	good, stopGood, err := goodUpstream()
	if err != nil {
		return r, err
	}
	defer stopGood()
	child, err := benchchild.Start([]string{bin, "-serve", "-silent", silent, "-good", good}, nil)
	if err != nil {
		return r, err
	}
	defer child.Stop(10 * time.Second)
	server, err := netip.ParseAddrPort(child.Addr)
	if err != nil {
		return r, fmt.Errorf("server address %q: %w", child.Addr, err)
	}
	pid := child.Pid()

	var wg sync.WaitGroup
	var done atomic.Bool
	var sent, answered atomic.Int64
	var floodErr, secondErr error
	wg.Add(2)
	go func() { defer wg.Done(); floodErr = flood(server, rate, &done, &sent, &answered) }()
	go func() { defer wg.Done(); r.ok, r.asked, secondErr = second(server, &done) }()
	time.Sleep(d)
	done.Store(true)
	wg.Wait()
	if floodErr != nil {
		return r, floodErr
	}
	if secondErr != nil {
		return r, secondErr
	}
	r.sent, r.answered = sent.Load(), answered.Load()
	r.kernelDrops = udpDrops(server.Port())
	time.Sleep(after)
	r.peak, r.rssAfter = procMem(pid)
	return r, nil
}

// udpDrops sums the drops column of /proc/net/udp for the sockets bound to
// port: datagrams the kernel threw away because the server's receive
// buffer was full (the server read slower than the flood came in).
func udpDrops(port uint16) int64 {
	b, err := os.ReadFile("/proc/net/udp")
	if err != nil {
		return -1
	}
	var n int64
	want := fmt.Sprintf(":%04X", port)
	for l := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 13 || !strings.HasSuffix(f[1], want) {
			continue
		}
		d, _ := strconv.ParseInt(f[len(f)-1], 10, 64)
		n += d
	}
	return n
}

// procMem reads the peak (VmHWM) and current (VmRSS) resident size of pid.
func procMem(pid int) (peak, rss int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmHWM:":
			peak = kb << 10
		case "VmRSS:":
			rss = kb << 10
		}
	}
	return peak, rss
}

// flood sends random uncached names from 127.0.0.1 at up to rate per
// second and counts the answers.
func flood(server netip.AddrPort, rate int, done *atomic.Bool, sent, answered *atomic.Int64) error {
	c, err := net.DialUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}, net.UDPAddrFromAddrPort(server))
	if err != nil {
		return fmt.Errorf("flood socket: %w", err)
	}
	defer c.Close()
	_ = c.SetWriteBuffer(4 << 20)
	go func() { // count answers until the socket closes
		buf := make([]byte, 1500)
		for {
			if _, err := c.Read(buf); err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			answered.Add(1)
		}
	}()
	q, err := packQuery("x000000000000.flood.example.")
	if err != nil {
		return err
	}
	const batch = 100
	tick := time.Second * batch / time.Duration(rate)
	next := time.Now()
	for !done.Load() {
		for range batch {
			randomLabel(q[13:25])
			binary.BigEndian.PutUint16(q, uint16(rand.Uint32()))
			if _, err := c.Write(q); err == nil {
				sent.Add(1)
			}
		}
		next = next.Add(tick)
		if w := time.Until(next); w > 0 {
			time.Sleep(w)
		}
	}
	time.Sleep(100 * time.Millisecond) // late answers
	return nil
}

// second asks one uncached name a second from 127.0.1.1 and counts the
// answers that come within 2 s.
func second(server netip.AddrPort, done *atomic.Bool) (ok, asked int, err error) {
	c, err := net.DialUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 1, 1)}, net.UDPAddrFromAddrPort(server))
	if err != nil {
		return 0, 0, fmt.Errorf("second client socket (needs 127.0.1.1 on loopback): %w", err)
	}
	defer c.Close()
	buf := make([]byte, 1500)
	time.Sleep(time.Second) // let the flood build up first
	for !done.Load() {
		start := time.Now()
		q, err := packQuery("x000000000000.good.example.")
		if err != nil {
			return ok, asked, err
		}
		randomLabel(q[13:25])
		id := binary.BigEndian.Uint16(q)
		asked++
		if _, err := c.Write(q); err != nil {
			return ok, asked, err
		}
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		for { // bounded by the read deadline
			n, err := c.Read(buf)
			if err != nil {
				break
			}
			if n >= 12 && binary.BigEndian.Uint16(buf) == id && buf[3]&0xF == dns.RcodeSuccess {
				ok++
				break
			}
		}
		if w := time.Second - time.Since(start); w > 0 {
			time.Sleep(w)
		}
	}
	return ok, asked, nil
}

func packQuery(name string) ([]byte, error) {
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	m.Id = uint16(rand.Uint32())
	return m.Pack()
}

const letters = "abcdefghijklmnopqrstuvwxyz0123456789"

func randomLabel(b []byte) {
	for i := range b {
		b[i] = letters[rand.IntN(len(letters))]
	}
}

// silentUpstream reads queries and never answers.
func silentUpstream() (string, func(), error) {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return "", nil, err
	}
	_ = c.SetReadBuffer(4 << 20)
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 1500)
		for {
			if _, err := c.Read(buf); errors.Is(err, net.ErrClosed) {
				return
			}
		}
	}()
	return c.LocalAddr().String(), func() { c.Close(); <-done }, nil
}

// goodUpstream answers every query with one A record.
func goodUpstream() (string, func(), error) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	started := make(chan struct{})
	srv := &dns.Server{PacketConn: pc, NotifyStartedFunc: func() { close(started) }, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		rr, _ := dns.NewRR(r.Question[0].Name + " 300 IN A 198.51.100.1")
		m.Answer = append(m.Answer, rr)
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		return "", nil, errors.New("good upstream did not start")
	}
	return pc.LocalAddr().String(), func() { _ = srv.Shutdown() }, nil
}

// child runs the server with the node's defaults (MaxWorkers, upstream
// timeouts, cache) and two upstream groups: default (silent) and good.
func child(silent, good string) error {
	ucfg := upstream.DefaultConfig()
	ucfg.Groups = map[string]upstream.GroupConfig{
		upstream.DefaultGroup: {Servers: []string{silent}},
		"good":                {Servers: []string{good}},
	}
	ucfg.Conditional = map[string]string{"good.example.": "good"}
	ucfg.Bootstrap = []string{good}
	res, err := upstream.New(ucfg, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		return err
	}
	defer res.Close()
	cfg := dataplane.Config{
		Node:      "flood",
		Listeners: []dataplane.ListenerConfig{{Address: "127.0.0.1:0", Protocols: []string{"udp"}}},
		Cache:     cache.DefaultConfig(),
	}
	s, err := dataplane.New(cfg, dataplane.Options{})
	if err != nil {
		return err
	}
	s.Swap(dataplane.NewSnapshot(dataplane.SnapshotInput{Version: "flood", Forwarder: res, Router: res}))
	if err := s.Start(context.Background()); err != nil {
		return err
	}
	fmt.Println(s.UDPAddrs()[0])
	_, _ = io.Copy(io.Discard, os.Stdin) // the parent closes stdin to stop us
	return s.Shutdown(context.Background())
}
