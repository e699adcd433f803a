package upstream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestWaitingQueriesHoldNoAnswerBuffer (issue #20 item 1): 1,000 queries
// waiting on a silent upstream hold a few KiB each, not an answer buffer
// of the largest message size. Before, each held two 64 KiB buffers (one
// for packing, one per attempt for the answer): 128 MiB for these 1,000.
func TestWaitingQueriesHoldNoAnswerBuffer(t *testing.T) {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadBuffer(4 << 20)
	var got atomic.Int64
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		buf := make([]byte, 1500)
		for {
			if _, err := c.Read(buf); err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			got.Add(1)
		}
	}()
	defer func() { c.Close(); <-readerDone }()
	r := newResolver(t, Config{Groups: map[string]GroupConfig{DefaultGroup: {Servers: []string{c.LocalAddr().String()}, Strategy: Strict, Timeout: 20 * time.Second}}})

	const n = 1000
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, _ = r.Forward(ctx, "", query(fmt.Sprintf("w%d.example.", i), dns.TypeA), clientAddr)
		}()
	}
	defer func() { cancel(); wg.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for got.Load() < n { // bounded: until every query reached the upstream
		if time.Now().After(deadline) {
			t.Fatalf("upstream saw %d of %d queries", got.Load(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	runtime.GC()
	var during runtime.MemStats
	runtime.ReadMemStats(&during)
	perQuery := (int64(during.HeapInuse) - int64(before.HeapInuse)) / n
	t.Logf("heap per waiting query: %d bytes", perQuery)
	if perQuery > 8<<10 {
		t.Fatalf("each waiting query holds %d bytes of heap, want under 8 KiB (no answer buffer until the answer comes)", perQuery)
	}
}
