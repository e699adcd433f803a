package transport_test

// The load generator and the idle-connection holder run in a child process
// (this test binary re-executed with SVC_TRANSPORT_HELPER set), so that the
// server process's CPU profile, heap and stack figures are the server's
// alone and both sides have their own GOMAXPROCS and file descriptor limit.
//
// The generator is as cheap as it can be for every transport: buffers are
// reused, nothing is allocated per query, and every flow keeps a window of
// queries in flight, refilled in batches (one write for all the answers read
// from one buffered read):
//   - udp: several connected sockets, each with a window of datagrams;
//   - dot: pipelined 2-byte-framed queries on each TLS connection;
//   - doh: a hand-rolled HTTP/2 client (x/net/http2 Framer and hpack) with
//     many POST streams per connection, like dnsperf -m doh.

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/quic-go/quic-go"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

const helperEnv = "SVC_TRANSPORT_HELPER"

// helperArgs configure the child process (JSON in the environment).
type helperArgs struct {
	Mode     string        // "load" or "idle"
	Kind     string        // udp, dot, doh (load); dot, doq (idle)
	Addr     string        // server address
	CAFile   string        // test CA
	Flows    int           // sockets or connections (load), connections (idle)
	Window   int           // queries in flight per flow
	Duration time.Duration // load
}

// loadResult is what the load mode prints.
type loadResult struct {
	Answers int64
	Seconds float64
	Errors  int64
}

func TestMain(m *testing.M) {
	if a := os.Getenv(helperEnv); a != "" {
		var args helperArgs
		if err := json.Unmarshal([]byte(a), &args); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if err := runHelper(args); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	raiseNoFile()
	os.Exit(m.Run())
}

// raiseNoFile lifts the soft RLIMIT_NOFILE to the hard limit.
func raiseNoFile() {
	var r syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r) == nil && r.Cur < r.Max {
		r.Cur = r.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r)
	}
}

// startHelper runs the child with args and GOMAXPROCS procs; its stdout is
// returned for reading, stdin for holding it (closed: the child exits).
func startHelper(t testing.TB, args helperArgs, procs int) (*exec.Cmd, *bufio.Reader, io.WriteCloser) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(args)
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+string(a), "GOMAXPROCS="+strconv.Itoa(procs))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, bufio.NewReader(out), in
}

func runHelper(a helperArgs) error {
	raiseNoFile()
	pem, err := os.ReadFile(a.CAFile)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	tc := &tls.Config{RootCAs: pool, ServerName: serverName, ClientSessionCache: tls.NewLRUClientSessionCache(64)}
	switch a.Mode {
	case "load":
		return runLoad(a, tc)
	case "idle":
		return runIdle(a, tc)
	}
	return fmt.Errorf("unknown mode %q", a.Mode)
}

func helperQuery() []byte {
	m := new(dns.Msg)
	m.SetQuestion("www.example.com.", dns.TypeA)
	b, _ := m.Pack()
	return b
}

// runLoad opens the flows, then runs them for the duration and prints a
// loadResult. Setup (dials, handshakes) is not timed.
func runLoad(a helperArgs, tc *tls.Config) error {
	type flow func(stop *atomic.Bool, n *atomic.Int64) error
	flows := make([]flow, 0, a.Flows)
	q := helperQuery()
	for range a.Flows {
		var f flow
		var err error
		switch a.Kind {
		case "udp":
			f, err = udpFlow(a, q)
		case "dot":
			f, err = dotFlow(a, tc, q)
		case "doh":
			f, err = dohFlow(a, tc, q)
		default:
			err = fmt.Errorf("kind %q", a.Kind)
		}
		if err != nil {
			return err
		}
		flows = append(flows, f)
	}
	var stop atomic.Bool
	var n, errs atomic.Int64
	var wg sync.WaitGroup
	fmt.Println("start") // the parent samples the server from here
	start := time.Now()
	for _, f := range flows {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(&stop, &n); err != nil && !stop.Load() {
				if errs.Add(1) == 1 {
					fmt.Fprintln(os.Stderr, "flow:", err)
				}
			}
		}()
	}
	time.Sleep(a.Duration)
	got := n.Load()
	el := time.Since(start).Seconds()
	stop.Store(true)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
	}
	return json.NewEncoder(os.Stdout).Encode(loadResult{Answers: got, Seconds: el, Errors: errs.Load()})
}

func udpFlow(a helperArgs, q []byte) (func(*atomic.Bool, *atomic.Int64) error, error) {
	c, err := net.Dial("udp", a.Addr)
	if err != nil {
		return nil, err
	}
	return func(stop *atomic.Bool, n *atomic.Int64) error {
		defer c.Close()
		buf := make([]byte, 1500)
		refill := func() {
			for range a.Window {
				_, _ = c.Write(q)
			}
		}
		refill()
		for !stop.Load() {
			_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
			if _, err := c.Read(buf); err != nil {
				refill() // lost datagrams: start the window again
				continue
			}
			n.Add(1)
			_, _ = c.Write(q)
		}
		return nil
	}, nil
}

func dotFlow(a helperArgs, tc *tls.Config, q []byte) (func(*atomic.Bool, *atomic.Int64) error, error) {
	cfg := tc.Clone()
	cfg.NextProtos = []string{"dot"}
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", a.Addr, cfg)
	if err != nil {
		return nil, err
	}
	frame := append(binary.BigEndian.AppendUint16(nil, uint16(len(q))), q...)
	frames := make([]byte, 0, len(frame)*a.Window)
	for range a.Window {
		frames = append(frames, frame...)
	}
	return func(stop *atomic.Bool, n *atomic.Int64) error {
		defer c.Close()
		br := bufio.NewReaderSize(c, 16<<10)
		buf := make([]byte, 1500)
		if _, err := c.Write(frames); err != nil {
			return err
		}
		for !stop.Load() {
			k := 0
			for k == 0 || br.Buffered() >= 2 {
				_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
				if _, err := io.ReadFull(br, buf[:2]); err != nil {
					return err
				}
				if _, err := io.ReadFull(br, buf[:binary.BigEndian.Uint16(buf)]); err != nil {
					return err
				}
				k++
			}
			n.Add(int64(k))
			if _, err := c.Write(frames[:k*len(frame)]); err != nil {
				return err
			}
		}
		return nil
	}, nil
}

// dohFlow is one HTTP/2 connection with Window POST streams in flight.
func dohFlow(a helperArgs, tc *tls.Config, q []byte) (func(*atomic.Bool, *atomic.Int64) error, error) {
	cfg := tc.Clone()
	cfg.NextProtos = []string{"h2"}
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", a.Addr, cfg)
	if err != nil {
		return nil, err
	}
	if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
		c.Close()
		return nil, fmt.Errorf("ALPN %q", p)
	}
	// Header blocks: the first request indexes the fields, later ones
	// refer to the dynamic table (what nghttp2 and Go's client do).
	var hb []byte
	var hbuf = &byteBuf{}
	enc := hpack.NewEncoder(hbuf)
	fields := []hpack.HeaderField{
		{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "https"},
		{Name: ":authority", Value: serverName}, {Name: ":path", Value: "/dns-query"},
		{Name: "content-type", Value: "application/dns-message"},
		{Name: "accept", Value: "application/dns-message"},
		{Name: "content-length", Value: strconv.Itoa(len(q))},
	}
	var first []byte
	for i := range 2 {
		hbuf.b = hbuf.b[:0]
		for _, f := range fields {
			_ = enc.WriteField(f)
		}
		if i == 0 {
			first = append([]byte(nil), hbuf.b...)
		}
	}
	hb = append([]byte(nil), hbuf.b...)
	dec := hpack.NewDecoder(4096, func(hpack.HeaderField) {})

	bw := bufio.NewWriterSize(c, 32<<10)
	br := bufio.NewReaderSize(c, 32<<10)
	fr := http2.NewFramer(bw, br)
	fr.SetReuseFrames()
	if _, err := bw.WriteString(http2.ClientPreface); err != nil {
		return nil, err
	}
	_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
	_ = fr.WriteWindowUpdate(0, 1<<30)
	var sid uint32 = 1
	sendWin := int64(65535)
	send := func(k int) error {
		for range k {
			blk := hb
			if sid == 1 {
				blk = first
			}
			if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: sid, BlockFragment: blk, EndHeaders: true}); err != nil {
				return err
			}
			if err := fr.WriteData(sid, true, q); err != nil {
				return err
			}
			sid += 2
			sendWin -= int64(len(q))
		}
		return bw.Flush()
	}
	return func(stop *atomic.Bool, n *atomic.Int64) error {
		defer c.Close()
		if err := send(a.Window); err != nil {
			return err
		}
		ready, recvd := 0, 0
		for !stop.Load() {
			_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
			f, err := fr.ReadFrame()
			if err != nil {
				return err
			}
			switch f := f.(type) {
			case *http2.HeadersFrame:
				if _, err := dec.Write(f.HeaderBlockFragment()); err != nil {
					return err
				}
				if f.StreamEnded() {
					return errors.New("response without body")
				}
			case *http2.DataFrame:
				recvd += len(f.Data())
				if f.StreamEnded() {
					ready++
				}
			case *http2.SettingsFrame:
				if !f.IsAck() {
					_ = fr.WriteSettingsAck()
				}
			case *http2.WindowUpdateFrame:
				if f.StreamID == 0 {
					sendWin += int64(f.Increment)
				}
			case *http2.PingFrame:
				if !f.IsAck() {
					_ = fr.WritePing(true, f.Data)
				}
			case *http2.GoAwayFrame:
				return fmt.Errorf("goaway %v", f.ErrCode)
			case *http2.RSTStreamFrame:
				return fmt.Errorf("rst %v", f.ErrCode)
			}
			if br.Buffered() > 0 {
				continue // read everything already here first
			}
			if recvd > 1<<20 {
				_ = fr.WriteWindowUpdate(0, uint32(recvd))
				recvd = 0
			}
			k := ready
			if room := int(sendWin / int64(len(q))); k > room {
				k = room
			}
			if k > 0 {
				n.Add(int64(k))
				ready -= k
				if err := send(k); err != nil {
					return err
				}
			} else if err := bw.Flush(); err != nil {
				return err
			}
		}
		return nil
	}, nil
}

type byteBuf struct{ b []byte }

func (w *byteBuf) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }

// runIdle opens Flows connections (dot, doq, doh: HTTP/2, doh1: HTTP/1.1),
// asks one query on each,
// prints "ready <n>" and holds them until stdin closes. On "ask\n" it
// answers with "ok" after one query on a new connection.
func runIdle(a helperArgs, tc *tls.Config) error {
	q := helperQuery()
	var closers []func()
	var qt *quic.Transport
	if a.Kind == "doq" {
		pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			return err
		}
		_ = pc.SetReadBuffer(4 << 20)
		qt = &quic.Transport{Conn: pc}
		defer qt.Close()
	}
	one := func() (func(), error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		switch a.Kind {
		case "dot":
			cfg := tc.Clone()
			cfg.NextProtos = []string{"dot"}
			d := tls.Dialer{Config: cfg}
			nc, err := d.DialContext(ctx, "tcp", a.Addr)
			if err != nil {
				return nil, err
			}
			c := nc.(*tls.Conn)
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(q))), q...)); err != nil {
				c.Close()
				return nil, err
			}
			var lb [2]byte
			if _, err := io.ReadFull(c, lb[:]); err != nil {
				c.Close()
				return nil, err
			}
			if _, err := io.ReadFull(c, make([]byte, binary.BigEndian.Uint16(lb[:]))); err != nil {
				c.Close()
				return nil, err
			}
			_ = c.SetDeadline(time.Time{})
			return func() { c.Close() }, nil
		case "doq":
			cfg := tc.Clone()
			cfg.NextProtos = []string{"doq"}
			addr, err := net.ResolveUDPAddr("udp", a.Addr)
			if err != nil {
				return nil, err
			}
			conn, err := qt.Dial(ctx, addr, cfg, &quic.Config{MaxIdleTimeout: 5 * time.Minute, KeepAlivePeriod: 0})
			if err != nil {
				return nil, err
			}
			dq := append([]byte(nil), q...)
			dq[0], dq[1] = 0, 0
			if _, err := doqAsk(ctx, conn, dq); err != nil {
				conn.CloseWithError(0, "")
				return nil, err
			}
			return func() { _ = conn.CloseWithError(0, "") }, nil
		case "doh", "doh1":
			// DoH over HTTP/2 ("doh") or HTTP/1.1 ("doh1"): one GET, then
			// the connection is kept open.
			cfg := tc.Clone()
			cfg.NextProtos = []string{"h2"}
			if a.Kind == "doh1" {
				cfg.NextProtos = []string{"http/1.1"}
			}
			d := tls.Dialer{Config: cfg}
			nc, err := d.DialContext(ctx, "tcp", a.Addr)
			if err != nil {
				return nil, err
			}
			c := nc.(*tls.Conn)
			req, _ := http.NewRequest(http.MethodGet, "https://dns.test/dns-query?dns="+base64.RawURLEncoding.EncodeToString(q), nil)
			var resp *http.Response
			var closer func()
			if a.Kind == "doh" {
				cc, err := (&http2.Transport{}).NewClientConn(c)
				if err != nil {
					c.Close()
					return nil, err
				}
				resp, err = cc.RoundTrip(req.WithContext(ctx))
				if err != nil {
					cc.Close()
					return nil, err
				}
				closer = func() { _ = cc.Close() }
			} else {
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				if err := req.Write(c); err != nil {
					c.Close()
					return nil, err
				}
				resp, err = http.ReadResponse(bufio.NewReader(c), req)
				if err != nil {
					c.Close()
					return nil, err
				}
				_ = c.SetDeadline(time.Time{})
				closer = func() { c.Close() }
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				closer()
				return nil, fmt.Errorf("doh: %s", resp.Status)
			}
			return closer, nil
		}
		return nil, fmt.Errorf("kind %q", a.Kind)
	}
	// Open in parallel, a few at a time.
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for range a.Flows {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			cl, err := one()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			closers = append(closers, cl)
		}()
	}
	wg.Wait()
	if len(closers) == 0 && firstErr != nil {
		return firstErr
	}
	if firstErr != nil {
		fmt.Fprintln(os.Stderr, "idle helper: some connections failed:", firstErr)
	}
	fmt.Printf("ready %d\n", len(closers))
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() == "ask" {
			cl, err := one()
			if err != nil {
				fmt.Printf("fail %v\n", err)
				continue
			}
			cl()
			fmt.Println("ok")
		}
	}
	for _, c := range closers {
		c()
	}
	runtime.KeepAlive(closers)
	return nil
}
