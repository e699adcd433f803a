package dashboard_test

import (
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svcdns/svc/test/nodetest"
)

// cutProxy is a TCP proxy in front of the node's API that can drop every
// connection at once and refuse new ones for a while: the network cut a
// phone on a train sees, between a real browser and a real server.
type cutProxy struct {
	ln      net.Listener
	target  string
	refuse  atomic.Bool
	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
	accepts atomic.Int64
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *cutProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.accepts.Add(1)
		if p.refuse.Load() {
			c.Close()
			continue
		}
		up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		p.track(c, up)
		p.wg.Add(2)
		go func() { defer p.wg.Done(); _, _ = io.Copy(up, c); up.Close() }()
		go func() { defer p.wg.Done(); _, _ = io.Copy(c, up); c.Close() }()
	}
}

func (p *cutProxy) track(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
}

// cut closes every open connection.
func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]struct{}{}
}

// TestLiveTailResumesAfterACut: the query log's live tail over SSE loses
// its connection mid-stream (every connection dropped, reconnects refused
// for a while); queries made during the cut appear after it, none lost and
// none twice.
func TestLiveTailResumesAfterACut(t *testing.T) {
	s := startServer(t, nodetest.Env("SERVICE_ADMIN_PASSWORD="+adminPassword))
	p := startCutProxy(t, s.Addrs.API)
	origin := "http://" + p.ln.Addr().String()

	b := newBrowser(t, origin, 1280, 900)
	b.open(origin + "/queries")
	b.waitText("h1", "Sign in")
	b.login("admin", adminPassword)
	b.waitText("h1", "Query log")
	b.waitText("[data-testid=live]", "Live")
	dig(t, s, "before-cut.example")
	b.waitJS("the row before the cut", `!!document.querySelector('tr[data-domain="before-cut.example"]')`)

	// Cut: drop every connection and refuse new ones while queries happen.
	p.refuse.Store(true)
	p.cut()
	b.waitJS("the tail noticing the cut", `document.querySelector('[data-testid=live]').innerText !== 'Live'`)
	const during = 5
	for i := 0; i < during; i++ {
		dig(t, s, fmt.Sprintf("during-cut-%d.example", i))
	}
	time.Sleep(1500 * time.Millisecond) // the browser retries into the refusal
	p.refuse.Store(false)

	b.waitText("[data-testid=live]", "Live")
	b.waitJS("every row of the cut", fmt.Sprintf(`[...Array(%d).keys()].every(i => !!document.querySelector('tr[data-domain="during-cut-' + i + '.example"]'))`, during))
	dig(t, s, "after-cut.example")
	b.waitJS("the row after the cut", `!!document.querySelector('tr[data-domain="after-cut.example"]')`)
	for i := 0; i < during; i++ {
		if n := evalAs[int](b, fmt.Sprintf(`document.querySelectorAll('tr[data-domain="during-cut-%d.example"]').length`, i)); n != 1 {
			t.Errorf("during-cut-%d.example shows %d times, want once", i, n)
		}
	}
	if n := evalAs[int](b, `document.querySelectorAll('tr[data-domain="before-cut.example"]').length`); n != 1 {
		t.Errorf("before-cut.example shows %d times after the resume, want once", n)
	}
	t.Logf("proxy accepted %d connections (the reconnects included)", p.accepts.Load())
}
