package node_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/internal/node"
	"github.com/svcdns/svc/test/nodetest"
)

// TestNodeParamForwardsToPeer: the query-log and statistics routes take
// node=<name> (docs/dashboard.md, Node selector): node A answers for its
// peer B by forwarding over B's internal listener, so B's queries are seen
// through A, A's own log stays A's, and the live stream of B reaches a
// client of A. An unknown node is 404, node=all 400 (not served yet).
func TestNodeParamForwardsToPeer(t *testing.T) {
	key := "SERVICE_ENCRYPTION_KEY=" + strings.Repeat("ab", 32)
	b := startNode(t, nodetest.Name("fwd-b"), nodetest.Env(key, "SERVICE_BOOTSTRAP_TOKEN="+bootstrapToken))
	a := startNode(t, nodetest.Name("fwd-a"), nodetest.Env(key, "SERVICE_BOOTSTRAP_TOKEN="+bootstrapToken, node.PeersEnv+"="+b.Addrs.Internal))

	if _, err := a.Exchange("udp", 2*time.Second, "seen-by-a.example.", dns.TypeA); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Exchange("udp", 2*time.Second, "seen-by-b.example.", dns.TypeA); err != nil {
		t.Fatal(err)
	}
	var page struct {
		Items []struct{ Domain string }
		Node  string
	}
	domains := func(path string) (string, []string) {
		code, body := apiCall(t, a, "GET", path, "")
		if code != 200 {
			t.Fatalf("GET %s on fwd-a = %d %s", path, code, body)
		}
		page.Items, page.Node = nil, ""
		if err := json.Unmarshal([]byte(body), &page); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, it := range page.Items {
			out = append(out, it.Domain)
		}
		return page.Node, out
	}
	nodetest.Eventually(t, 10*time.Second, "fwd-b's query through fwd-a", func() bool {
		n, ds := domains("/queries?node=fwd-b")
		return n == "fwd-b" && strings.Join(ds, " ") == "seen-by-b.example"
	})
	// each node writes its rows on its own flush tick: wait for fwd-a's, then
	// both ways of asking fwd-a for its own log show that row alone
	nodetest.Eventually(t, 10*time.Second, "fwd-a's own query in its log", func() bool {
		n, ds := domains("/queries?node=fwd-a")
		return n == "fwd-a" && len(ds) > 0
	})
	if n, ds := domains("/queries?node=fwd-a"); n != "fwd-a" || strings.Join(ds, " ") != "seen-by-a.example" {
		t.Errorf("/queries?node=fwd-a = node %s %v, want fwd-a's own query only", n, ds)
	}
	if n, ds := domains("/queries"); n != "fwd-a" || strings.Join(ds, " ") != "seen-by-a.example" {
		t.Errorf("/queries = node %s %v, want fwd-a's own query only", n, ds)
	}
	// Totals come from the rollups, which may lag the rows a little.
	nodetest.Eventually(t, 10*time.Second, "/stats/summary?node=fwd-b answers fwd-b's total 1", func() bool {
		code, body := apiCall(t, a, "GET", "/stats/summary?window=1h&step=1m&node=fwd-b", "")
		return code == 200 && strings.Contains(body, `"node":"fwd-b"`) && strings.Contains(body, `"total":1`)
	})
	if code, body := apiCall(t, a, "GET", "/queries?node=nowhere", ""); code != 404 || !strings.Contains(body, "GET /nodes") {
		t.Errorf("/queries?node=nowhere = %d %s, want 404 naming GET /nodes", code, body)
	}
	if code, body := apiCall(t, a, "GET", "/stats/top?node=all", ""); code != 400 {
		t.Errorf("/stats/top?node=all = %d %s, want 400", code, body)
	}

	// The live stream of fwd-b, read through fwd-a.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "https://"+a.Addrs.API+"/api/v1/queries/stream?node=fwd-b", nil)
	req.Header.Set("Authorization", "Bearer "+bootstrapToken)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream through fwd-a: %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	go func() {
		// The stream starts live: query fwd-b until the reader has it.
		for ctx.Err() == nil {
			_, _ = b.Exchange("udp", time.Second, "live-on-b.example.", dns.TypeA)
			time.Sleep(300 * time.Millisecond)
		}
	}()
	start := time.Now()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "data:") && strings.Contains(l, "live-on-b.example") {
			t.Logf("fwd-b's live query reached fwd-a's stream client after %s", time.Since(start).Round(time.Millisecond))
			return
		}
	}
	t.Fatalf("no event of fwd-b through fwd-a's stream: %v", sc.Err())
}
