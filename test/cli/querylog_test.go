package cli_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/test/nodetest"
)

// query asks the node's DNS listener for name (the answer does not matter:
// every query is logged, answered or not).
func (s *server) query(t *testing.T, name string) {
	t.Helper()
	if _, err := s.Exchange("udp", 3*time.Second, name, dns.TypeA); err != nil {
		t.Logf("query %s: %v (logged anyway)", name, err)
	}
}

// follower runs `svc logs -f` and collects its stdout line by line.
type follower struct {
	mu     sync.Mutex
	lines  []string
	stderr strings.Builder
	cancel context.CancelFunc
	done   chan struct{}
}

func (u *user) follow(t *testing.T, args ...string) *follower {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	cmd := exec.CommandContext(ctx, svcBin, append([]string{"logs", "-f"}, args...)...)
	cmd.Env = u.env
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	f := &follower{cancel: cancel, done: make(chan struct{})}
	cmd.Stderr = &syncWriter{w: &f.stderr}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(f.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f.mu.Lock()
			f.lines = append(f.lines, sc.Text())
			f.mu.Unlock()
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(f.stop)
	return f
}

func (f *follower) stop() {
	f.cancel()
	<-f.done
}

// count is how many output lines contain s.
func (f *follower) count(s string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, l := range f.lines {
		if strings.Contains(l, s) {
			n++
		}
	}
	return n
}

func (f *follower) output() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.lines, "\n")
}

func TestLogsAndStats(t *testing.T) {
	s := startServer(t)
	u := loggedIn(t, s)
	names := []string{"alpha.cli-test.example", "beta.cli-test.example", "alpha.cli-test.example"}
	for _, n := range names {
		s.query(t, n)
	}
	// The writer stores rows in batches: wait until every row is listed.
	var out string
	nodetest.Eventually(t, 15*time.Second, "queries in svc logs", func() bool {
		out = u.ok("logs")
		// all three rows: the second alpha may come in a later batch than beta
		return strings.Count(out, "alpha.cli-test.example") == 2 && strings.Contains(out, "beta.cli-test.example")
	})
	if !strings.HasPrefix(out, "TIME") || !strings.Contains(out, "DOMAIN") {
		t.Errorf("logs table has no header:\n%s", out)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "alpha.cli-test.example") && !strings.Contains(l, " A ") {
			t.Errorf("row without its type: %q", l)
		}
	}

	// -o json: the items of GET /queries, filtered by domain on the server.
	var items []map[string]any
	raw := u.ok("logs", "-o", "json", "--domain", "alpha.cli-test.example", "--qtype", "a")
	if err := json.Unmarshal([]byte(raw), &items); err != nil {
		t.Fatalf("logs -o json: %v\n%s", err, raw)
	}
	if len(items) != 2 {
		t.Errorf("--domain alpha: %d items, want 2:\n%s", len(items), raw)
	}
	for _, it := range items {
		if it["domain"] != "alpha.cli-test.example" || it["type"] != "A" {
			t.Errorf("item %v", it)
		}
	}
	if raw := u.ok("logs", "-o", "json", "--limit", "1"); strings.Count(raw, `"domain"`) != 1 {
		t.Errorf("--limit 1:\n%s", raw)
	}
	if raw := u.ok("logs", "-o", "json", "--since", "1h", "--domain", "cli-test", "--domain-match", "substring"); strings.Count(raw, `"domain"`) != 3 {
		t.Errorf("--since 1h --domain-match substring:\n%s", raw)
	}
	if r := u.run("logs", "--status-class", "nonsense"); r.Code == 0 || !strings.Contains(r.Stderr, "--status-class") || !strings.Contains(r.Stderr, "allowed, blocked") {
		t.Errorf("bad status class: %d %s", r.Code, r.Stderr)
	}
	// The aliases work.
	if out := u.ok("querylog", "--no-headers"); strings.HasPrefix(out, "TIME") || !strings.Contains(out, "beta.cli-test.example") {
		t.Errorf("querylog --no-headers:\n%s", out)
	}

	// Formatted for people: counts as integers, the share as a percentage,
	// no raw floats such as 0.6666666666666666 or 1e+06.
	sum := u.ok("stats", "summary")
	for _, re := range []string{`(?m)^Queries:\s+3$`, `(?m)^Blocked:\s+0 \(0\.0%\)$`, `(?m)^Average latency:\s+\d+\.\d ms$`} {
		if !regexp.MustCompile(re).MatchString(sum) {
			t.Errorf("stats summary does not match %s:\n%s", re, sum)
		}
	}
	if regexp.MustCompile(`\d\.\d{3,}|e\+\d`).MatchString(sum) {
		t.Errorf("stats summary prints raw floats:\n%s", sum)
	}
	var sj map[string]any
	if err := json.Unmarshal([]byte(u.ok("stats", "summary", "-o", "json", "--window", "1h")), &sj); err != nil || sj["total"] != float64(3) {
		t.Errorf("stats summary -o json: %v %v", err, sj)
	}
	top := u.ok("stats", "top", "--dim", "domains")
	if !strings.HasPrefix(top, "KEY") || !strings.Contains(top, "alpha.cli-test.example") || !strings.Contains(top, "beta.cli-test.example") {
		t.Errorf("stats top:\n%s", top)
	}
	lines := strings.Split(strings.TrimSpace(top), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[1], "alpha.cli-test.example") || !strings.Contains(lines[1], " 2 ") {
		t.Errorf("stats top: alpha (2 queries) first:\n%s", top)
	}
	if top := u.ok("stats", "top", "--dim", "domains", "--top", "1"); strings.Contains(top, "beta.cli-test.example") {
		t.Errorf("stats top --top 1:\n%s", top)
	}
	if r := u.run("stats", "top", "--dim", "nope"); r.Code == 0 {
		t.Errorf("bad dim accepted")
	}
}

func TestLogsFollow(t *testing.T) {
	s := startServer(t)
	u := loggedIn(t, s)
	// A row stored before the stream starts is not replayed (rows still
	// in the writer's batch are streamed when stored, so wait for it).
	s.query(t, "before.follow.example")
	nodetest.Eventually(t, 15*time.Second, "old row stored", func() bool { return strings.Contains(u.ok("logs"), "before.follow.example") })
	f := u.follow(t)
	// The stream starts live: wait until it is connected (header printed),
	// then query until the row shows (the subscription may lag the header).
	nodetest.Eventually(t, 15*time.Second, "logs -f header", func() bool { return f.count("DOMAIN") == 1 })
	nodetest.Eventually(t, 20*time.Second, "live row in logs -f", func() bool {
		if f.count("after.follow.example") > 0 {
			return true
		}
		s.query(t, "after.follow.example")
		time.Sleep(400 * time.Millisecond)
		return f.count("after.follow.example") > 0
	})
	if f.count("before.follow.example") != 0 {
		t.Errorf("a live stream replayed an old row:\n%s", f.output())
	}
	f.stop()

	// -o json prints one item per line.
	fj := u.follow(t, "-o", "json", "--domain", "json.follow.example")
	nodetest.Eventually(t, 20*time.Second, "json row in logs -f", func() bool {
		s.query(t, "json.follow.example")
		time.Sleep(400 * time.Millisecond)
		return fj.count("json.follow.example") > 0
	})
	fj.stop()
	for _, l := range strings.Split(fj.output(), "\n") {
		var it map[string]any
		if err := json.Unmarshal([]byte(l), &it); err != nil || it["domain"] != "json.follow.example" {
			t.Errorf("logs -f -o json line %q: %v", l, err)
		}
	}
}

// cuttingProxy forwards to the API and cuts the first stream after n events.
type cuttingProxy struct {
	target  *url.URL
	n       int
	streams atomic.Int32
	mu      sync.Mutex
	lastIDs []string // Last-Event-ID of each stream request
}

func (p *cuttingProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/queries/stream") {
		httputil.NewSingleHostReverseProxy(p.target).ServeHTTP(w, r)
		return
	}
	p.mu.Lock()
	p.lastIDs = append(p.lastIDs, r.Header.Get("Last-Event-ID"))
	p.mu.Unlock()
	first := p.streams.Add(1) == 1
	out, _ := http.NewRequestWithContext(r.Context(), r.Method, p.target.String()+r.URL.RequestURI(), nil)
	out.Header = r.Header.Clone()
	res, err := http.DefaultTransport.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer res.Body.Close()
	for k, vs := range res.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(res.StatusCode)
	w.(http.Flusher).Flush()
	br := bufio.NewReader(res.Body)
	events := 0
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			_, _ = io.WriteString(w, line)
			w.(http.Flusher).Flush()
		}
		if err != nil {
			return
		}
		if line == "\n" {
			events++
			if first && events >= p.n {
				// Drop the connection mid-stream.
				hj, ok := w.(http.Hijacker)
				if !ok {
					return
				}
				c, _, err := hj.Hijack()
				if err == nil {
					c.Close()
				}
				return
			}
		}
	}
}

func TestLogsFollowResumesAfterDrop(t *testing.T) {
	s := startServer(t)
	target, _ := url.Parse(s.URL)
	p := &cuttingProxy{target: target, n: 3}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: p}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })

	// The user's context points at the proxy.
	u := newUser(t)
	u.okIn(adminPassword+"\n", "login", "--server", "http://"+ln.Addr().String(), "-u", "admin", "--password-stdin", "--name", "viaproxy")
	f := u.follow(t, "--domain", "resume.example", "-o", "json")
	nodetest.Eventually(t, 15*time.Second, "stream connected", func() bool { return p.streams.Load() >= 1 })
	time.Sleep(500 * time.Millisecond)
	// Ten queries, one at a time, so that some arrive while the CLI is
	// reconnecting; each must show exactly once.
	const total = 10
	for i := 0; i < total; i++ {
		s.query(t, "resume.example")
		time.Sleep(150 * time.Millisecond)
	}
	nodetest.Eventually(t, 30*time.Second, "all rows after the resume", func() bool { return f.count("resume.example") >= total })
	time.Sleep(2 * time.Second) // room for duplicates to show
	f.stop()
	ids := map[float64]int{}
	for _, l := range strings.Split(f.output(), "\n") {
		var it map[string]any
		if err := json.Unmarshal([]byte(l), &it); err != nil {
			t.Errorf("line %q: %v", l, err)
			continue
		}
		id, _ := it["id"].(float64)
		ids[id]++
	}
	if len(ids) != total {
		t.Errorf("%d distinct rows, want %d:\n%s", len(ids), total, f.output())
	}
	for id, n := range ids {
		if n != 1 {
			t.Errorf("row %v shown %d times", id, n)
		}
	}
	if p.streams.Load() < 2 {
		t.Fatalf("the CLI did not reconnect (streams %d)", p.streams.Load())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lastIDs[0] != "" || p.lastIDs[1] == "" {
		t.Errorf("Last-Event-ID of the stream requests: %q", p.lastIDs)
	}
	if !strings.Contains(f.stderr.String(), "resuming") {
		t.Errorf("stderr says nothing of the resume: %s", f.stderr.String())
	}
}
