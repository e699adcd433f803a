package transport_test

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// BenchmarkTransportRatio measures queries per second of Do53 UDP, DoT and
// DoH (HTTP/2) with 8 concurrent connections each, for a cached
// (authoritative, pre-encoded) answer, in the same run, and reports DoT and
// DoH as ratios of UDP. Run: go test ./test/transport -run X -bench Ratio -benchtime 1x
func BenchmarkTransportRatio(b *testing.B) {
	st := newStack(b, stackOpts{})
	const conns, dur = 8, 2 * time.Second
	measure := func(worker func(stop *atomic.Bool, n *atomic.Int64)) float64 {
		var stop atomic.Bool
		var n atomic.Int64
		var wg sync.WaitGroup
		for range conns {
			wg.Add(1)
			go func() { defer wg.Done(); worker(&stop, &n) }()
		}
		time.Sleep(dur)
		stop.Store(true)
		wg.Wait()
		return float64(n.Load()) / dur.Seconds()
	}
	q := query(b, 1)
	udp := measure(func(stop *atomic.Bool, n *atomic.Int64) {
		c, err := net.Dial("udp", st.addr("udp").String())
		if err != nil {
			b.Error(err)
			return
		}
		defer c.Close()
		buf := make([]byte, 1500)
		for !stop.Load() {
			_ = c.SetDeadline(time.Now().Add(time.Second))
			if _, err := c.Write(q); err != nil {
				continue
			}
			if _, err := c.Read(buf); err == nil {
				n.Add(1)
			}
		}
	})
	dot := measure(func(stop *atomic.Bool, n *atomic.Int64) {
		c := dotConn(b, st, st.pki.clientTLS("dot"))
		defer c.Close()
		frame := append(binary.BigEndian.AppendUint16(nil, uint16(len(q))), q...)
		buf := make([]byte, 1500)
		for !stop.Load() {
			_ = c.SetDeadline(time.Now().Add(time.Second))
			if _, err := c.Write(frame); err != nil {
				return
			}
			if _, err := io.ReadFull(c, buf[:2]); err != nil {
				return
			}
			if _, err := io.ReadFull(c, buf[:binary.BigEndian.Uint16(buf)]); err != nil {
				return
			}
			n.Add(1)
		}
	})
	doh := measure(func(stop *atomic.Bool, n *atomic.Int64) {
		c := dohClient(st)
		for !stop.Load() {
			resp, err := c.Post("https://"+serverName+"/dns-query", "application/dns-message", bytes.NewReader(q))
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				n.Add(1)
			}
		}
	})
	b.ReportMetric(udp, "udp-qps")
	b.ReportMetric(dot, "dot-qps")
	b.ReportMetric(doh, "doh-qps")
	b.ReportMetric(dot/udp, "dot/udp")
	b.ReportMetric(doh/udp, "doh/udp")
}

// BenchmarkIdleDoTConn reports heap and stack bytes per idle DoT
// connection (both ends live in this process: an upper bound for the
// server side).
func BenchmarkIdleDoTConn(b *testing.B) {
	st := newStack(b, stackOpts{})
	const n = 200
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	conns := make([]net.Conn, 0, n)
	for range n {
		c := dotConn(b, st, st.pki.clientTLS("dot"))
		q := query(b, 1)
		_, _ = c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(q))), q...))
		buf := make([]byte, 512)
		_, _ = io.ReadAtLeast(c, buf, 2)
		conns = append(conns, c)
	}
	time.Sleep(100 * time.Millisecond)
	runtime.GC()
	runtime.ReadMemStats(&after)
	used := float64((after.HeapInuse+after.StackInuse)-(before.HeapInuse+before.StackInuse)) / n
	for _, c := range conns {
		c.Close()
	}
	b.ReportMetric(used, "bytes/idle-conn(both-ends)")
	_ = dns.TypeA
}
