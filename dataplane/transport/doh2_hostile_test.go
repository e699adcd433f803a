package transport

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/svcdns/svc/test/testpki"
)

// TestDoH2StalledWindow: a client opens 100 streams with a zero stream
// window and never grants any: the answers wait, holding only their own
// bytes, and the connection gets GOAWAY ENHANCE_YOUR_CALM and closes
// within the stall bound; the memory they held is given back.
func TestDoH2StalledWindow(t *testing.T) {
	old := h2StallTimeout
	h2StallTimeout = 2 * time.Second
	t.Cleanup(func() { h2StallTimeout = old })
	e := newH2Env(t, 30*time.Second)
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	r := e.raw(t, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	_ = r.c.SetDeadline(time.Now().Add(h2StallTimeout + 5*time.Second))
	q := base64.RawURLEncoding.EncodeToString(testQuery(t, "stall.example."))
	for i := range h2MaxStreams {
		_ = r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1),
			BlockFragment: r.headers("GET", "/dns-query?dns="+q), EndHeaders: true, EndStream: true})
	}
	r.flush()
	start := time.Now()
	// Every answer's HEADERS arrives; no DATA can.
	headers := 0
	r.until("100 response HEADERS", func(f http2.Frame) bool {
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			headers++
		case *http2.DataFrame:
			t.Fatalf("DATA on stream %d in a zero window", f.StreamID)
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = r.fr.WriteSettingsAck()
				r.flush()
			}
		}
		return headers == h2MaxStreams
	})
	held := e.s.h2Blocked.Load()
	var during runtime.MemStats
	runtime.ReadMemStats(&during)
	// Each answer is ~50 bytes: held is what the answers need, not a
	// pooled 4 KiB buffer each.
	if held <= 0 || held > int64(h2MaxStreams*128) {
		t.Fatalf("blocked answers hold %d bytes for %d streams", held, h2MaxStreams)
	}
	r.goAway(http2.ErrCodeEnhanceYourCalm)
	took := time.Since(start)
	if took < h2StallTimeout-100*time.Millisecond || took > h2StallTimeout+3*time.Second {
		t.Fatalf("closed after %v, want about %v", took, h2StallTimeout)
	}
	deadline := time.Now().Add(3 * time.Second)
	for e.s.h2Blocked.Load() != 0 || e.d.connCount() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("after close: %d blocked bytes, %d connections", e.s.h2Blocked.Load(), e.d.connCount())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := testutil.ToFloat64(e.s.m.rejected.WithLabelValues("doh", "stalled")); n != 1 {
		t.Fatalf("rejected{reason=stalled} %v, want 1", n)
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	t.Logf("100 stalled streams: answers held %d bytes; heap in use %d KB before, %d KB stalled, %d KB after close; closed after %v",
		held, before.HeapInuse>>10, during.HeapInuse>>10, after.HeapInuse>>10, took.Round(time.Millisecond))
}

// TestDoH2HPACKBomb: a client that keeps sending header blocks over the
// list limit gets 431 for the first h2MaxHeaderRejects, then GOAWAY
// ENHANCE_YOUR_CALM: the decoding work per connection is bounded.
func TestDoH2HPACKBomb(t *testing.T) {
	e := newH2Env(t, 30*time.Second)
	var extra []string
	for i := range 20 {
		extra = append(extra, fmt.Sprintf("x-pad-%d", i), strings.Repeat("v", 1000))
	}
	const conns = 8
	cpu0 := processCPU(t)
	for range conns {
		r := e.raw(t)
		blk := r.headers("GET", "/dns-query?dns=AAAA", extra...)
		statuses := 0
		for i := range 100 {
			_ = r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: blk[:10000], EndStream: true})
			_ = r.fr.WriteContinuation(uint32(2*i+1), true, blk[10000:])
		}
		r.flood()
		r.until("GOAWAY", func(f http2.Frame) bool {
			switch f := f.(type) {
			case *http2.MetaHeadersFrame:
				if f.PseudoValue("status") != "431" {
					t.Fatalf("status %s", f.PseudoValue("status"))
				}
				statuses++
			case *http2.GoAwayFrame:
				if f.ErrCode != http2.ErrCodeEnhanceYourCalm {
					t.Fatalf("GOAWAY %v", f.ErrCode)
				}
				return true
			}
			return false
		})
		r.eof()
		if statuses != h2MaxHeaderRejects {
			t.Fatalf("%d 431s before GOAWAY, want %d", statuses, h2MaxHeaderRejects)
		}
	}
	if n := testutil.ToFloat64(e.s.m.rejected.WithLabelValues("doh", "header_abuse")); n != conns {
		t.Fatalf("rejected{reason=header_abuse} %v, want %d", n, conns)
	}
	t.Logf("%d connections x 100 oversized header blocks: each closed after %d 431s; process CPU (client and server) %v",
		conns, h2MaxHeaderRejects, processCPU(t)-cpu0)
}

// TestDoH2MadeYouReset (CVE-2025-8671): a client sends a request and then
// a malformed frame on its stream (WINDOW_UPDATE of 0) so that the server
// resets the stream while it answers; done in a loop this was unbounded
// work. Those resets count as client resets: GOAWAY ENHANCE_YOUR_CALM
// after the rapid-reset budget, and the handler ran about that often.
func TestDoH2MadeYouReset(t *testing.T) {
	e := newH2Env(t, 30*time.Second)
	r := e.raw(t)
	r.fr.AllowIllegalWrites = true // WINDOW_UPDATE of 0
	q := base64.RawURLEncoding.EncodeToString(testQuery(t, "reset.example."))
	// Rounds of 50 streams, each waiting for its resets: the stream limit
	// (REFUSED_STREAM, counted already) is never reached.
	const n, round = 1000, 50
	goAway := false
	for i := 0; i < n && !goAway; i += round {
		for j := i; j < i+round; j++ {
			id := uint32(2*j + 1)
			_ = r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: r.headers("GET", "/dns-query?dns="+q), EndHeaders: true, EndStream: true})
			_ = r.fr.WriteWindowUpdate(id, 0)
		}
		r.flood()
		resets := 0
		r.until("resets or GOAWAY", func(f http2.Frame) bool {
			switch f := f.(type) {
			case *http2.RSTStreamFrame:
				if f.ErrCode != http2.ErrCodeProtocol {
					t.Fatalf("RST_STREAM %v", f.ErrCode)
				}
				resets++
			case *http2.GoAwayFrame:
				if f.ErrCode != http2.ErrCodeEnhanceYourCalm {
					t.Fatalf("GOAWAY %v", f.ErrCode)
				}
				goAway = true
			}
			return goAway || resets == round
		})
	}
	if !goAway {
		t.Fatalf("%d streams reset by malformed frames and no GOAWAY", n)
	}
	for {
		if _, err := r.fr.ReadFrame(); err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "reset") {
				t.Fatal(err)
			}
			break
		}
	}
	e.fh.mu.Lock()
	served := len(e.fh.ids)
	e.fh.mu.Unlock()
	if served > 2*h2ResetSlack {
		t.Fatalf("the handler ran %d times for %d reset streams", served, n)
	}
	t.Logf("%d requests each reset by a malformed frame: GOAWAY after %d answered", n, served)
}

// processCPU is the user plus system CPU time of this process.
func processCPU(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestDoH2BlockedServerBound: answers waiting for window across all
// connections of a listener are bounded (h2MaxBlockedTotal): a connection
// whose answer would pass it gets GOAWAY ENHANCE_YOUR_CALM at once.
func TestDoH2BlockedServerBound(t *testing.T) {
	e := newH2Env(t, 30*time.Second)
	e.s.h2Blocked.Store(h2MaxBlockedTotal) // as if other connections held it all
	r := e.raw(t, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	q := base64.RawURLEncoding.EncodeToString(testQuery(t, "bound.example."))
	_ = r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1,
		BlockFragment: r.headers("GET", "/dns-query?dns="+q), EndHeaders: true, EndStream: true})
	r.flush()
	start := time.Now()
	r.goAway(http2.ErrCodeEnhanceYourCalm)
	if took := time.Since(start); took > h2StallTimeout/2 {
		t.Fatalf("GOAWAY after %v", took)
	}
	deadline := time.Now().Add(3 * time.Second)
	for e.s.h2Blocked.Load() != h2MaxBlockedTotal {
		if time.Now().After(deadline) {
			t.Fatalf("blocked bytes %d after close, want %d", e.s.h2Blocked.Load(), h2MaxBlockedTotal)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStalledWindowTLS: 100 answers stuck behind a zero window on a TLS
// listener. The lean server (whose reader waits in the feeder, not on a
// read deadline) sends GOAWAY ENHANCE_YOUR_CALM at h2StallTimeout and
// closes; with listeners.dohServer stdlib, x/net applies the write timeout
// per stream and resets the 100 streams.
func TestStalledWindowTLS(t *testing.T) {
	oldW, oldS := h2WriteTimeout, h2StallTimeout
	h2WriteTimeout, h2StallTimeout = 2*time.Second, 2*time.Second
	t.Cleanup(func() { h2WriteTimeout, h2StallTimeout = oldW, oldS })
	for _, server := range []string{DoHServerLean, DoHServerStdlib} {
		t.Run(server, func(t *testing.T) { testStalledWindowTLS(t, server) })
	}
}

func testStalledWindowTLS(t *testing.T, server string) {
	p := testpki.New(t)
	s, err := New(&fakeHandler{}, Config{DoHServer: server,
		DoH: []Listener{{Address: "127.0.0.1:0", CertFile: p.CertFile, KeyFile: p.KeyFile}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	c, err := (&tls.Dialer{Config: p.ClientTLS("h2")}).DialContext(context.Background(), "tcp", s.Addrs("doh")[0].String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(h2StallTimeout + 5*time.Second))
	r := &rawConn{t: t, c: c, bw: bufio.NewWriter(c)}
	r.fr = http2.NewFramer(r.bw, bufio.NewReader(c))
	r.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	r.enc = hpack.NewEncoder(&r.hbuf)
	_, _ = r.bw.WriteString(http2.ClientPreface)
	_ = r.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	q := base64.RawURLEncoding.EncodeToString(testQuery(t, "stall.example."))
	for i := range h2MaxStreams {
		_ = r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1),
			BlockFragment: r.headers("GET", "/dns-query?dns="+q), EndHeaders: true, EndStream: true})
	}
	r.flush()
	start := time.Now()
	resets, goAway := 0, false
	r.until("GOAWAY or 100 resets", func(f http2.Frame) bool {
		switch f := f.(type) {
		case *http2.RSTStreamFrame:
			resets++
		case *http2.GoAwayFrame:
			if f.ErrCode != http2.ErrCodeEnhanceYourCalm {
				t.Fatalf("GOAWAY %v", f.ErrCode)
			}
			goAway = true
		case *http2.DataFrame:
			if len(f.Data()) > 0 {
				t.Fatalf("DATA on stream %d in a zero window", f.StreamID)
			}
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = r.fr.WriteSettingsAck()
				r.flush()
			}
		}
		return goAway || resets == h2MaxStreams
	})
	took := time.Since(start)
	if took < h2StallTimeout-100*time.Millisecond {
		t.Fatalf("after %v, before the bound", took)
	}
	if server == DoHServerLean {
		if !goAway {
			t.Fatal("lean: resets instead of GOAWAY")
		}
		r.eof()
	}
	t.Logf("%s: 100 stalled streams: GOAWAY %v, %d resets, after %v", server, goAway, resets, took.Round(time.Millisecond))
}

// BenchmarkDoH2HPACKBomb (make bench): the server's cost of one abusive
// connection (100 oversized header blocks; closed with GOAWAY after
// h2MaxHeaderRejects) beside the cost of one ordinary DoH answer on an open
// connection, measured in the same run: before the GOAWAY a bomb
// connection was never closed and each block cost ~50 answers.
func BenchmarkDoH2HPACKBomb(b *testing.B) {
	b.Run("bomb-connection", func(b *testing.B) {
		e := newH2Env(b, 30*time.Second)
		var extra []string
		for i := range 20 {
			extra = append(extra, fmt.Sprintf("x-pad-%d", i), strings.Repeat("v", 1000))
		}
		b.ResetTimer()
		for range b.N {
			r := e.raw(b)
			blk := r.headers("GET", "/dns-query?dns=AAAA", extra...)
			for i := range 100 {
				_ = r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: blk[:10000], EndStream: true})
				_ = r.fr.WriteContinuation(uint32(2*i+1), true, blk[10000:])
			}
			r.flood()
			r.until("GOAWAY", func(f http2.Frame) bool { _, ok := f.(*http2.GoAwayFrame); return ok })
			r.eof()
		}
	})
	b.Run("answer", func(b *testing.B) {
		e := newH2Env(b, 30*time.Second)
		r := e.raw(b)
		q := base64.RawURLEncoding.EncodeToString(testQuery(b, "answer.example."))
		blk := r.headers("GET", "/dns-query?dns="+q)
		b.ResetTimer()
		// Rounds of 50 streams (under the concurrent-stream limit).
		for done, id := 0, uint32(1); done < b.N; {
			n := min(50, b.N-done)
			for range n {
				_ = r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: blk, EndHeaders: true, EndStream: true})
				id += 2
			}
			r.flood()
			_ = r.c.SetDeadline(time.Now().Add(10 * time.Second))
			got := 0
			r.until("answers", func(f http2.Frame) bool {
				if d, ok := f.(*http2.DataFrame); ok {
					// Give the connection window back, as a client does.
					if n := len(d.Data()); n > 0 {
						_ = r.fr.WriteWindowUpdate(0, uint32(n))
					}
					if d.StreamEnded() {
						got++
					}
				}
				if wu, ok := f.(*http2.SettingsFrame); ok && !wu.IsAck() {
					_ = r.fr.WriteSettingsAck()
					r.flush()
				}
				return got == n
			})
			r.flood()
			done += n
			if id > 1<<30 { // a fresh connection before stream IDs run out
				r = e.raw(b)
				blk, id = r.headers("GET", "/dns-query?dns="+q), 1
			}
		}
	})
}
