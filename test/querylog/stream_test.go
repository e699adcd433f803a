package querylog_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/internal/querylog"
)

type event struct {
	id   int64
	item querylog.QueryItem
}

// readEvents reads n events from an SSE body, skipping comments.
func readEvents(t *testing.T, sc *bufio.Scanner, n int) []event {
	t.Helper()
	var out []event
	var cur event
	for len(out) < n && sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			id, err := strconv.ParseInt(line[4:], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			cur.id = id
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(line[6:]), &cur.item); err != nil {
				t.Fatal(err)
			}
		case line == "" && cur.id != 0:
			out = append(out, cur)
			cur = event{}
		}
	}
	if len(out) < n {
		t.Fatalf("stream ended after %d of %d events: %v", len(out), n, sc.Err())
	}
	return out
}

func open(t *testing.T, ctx context.Context, url, lastID string) (*http.Response, *bufio.Scanner) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return resp, bufio.NewScanner(resp.Body)
}

// The client reads some events, disconnects, more queries arrive, and it
// resumes with Last-Event-ID: it sees every row exactly once, in order.
func TestStreamResumeExactlyOnce(t *testing.T) {
	e := newEnv(t, querylog.DefaultConfig(), querylog.Options{FlushInterval: 10 * time.Millisecond})
	srv := httptest.NewServer(e.w.StreamHandler(querylog.StreamOptions{Heartbeat: 50 * time.Millisecond}))
	defer srv.Close()

	// Rows from before the first connection are not sent without Last-Event-ID.
	e.ask(t, "early.example.net.", dns.TypeA, dns.ClassINET)
	e.flush(t)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c1, cancel1 := context.WithCancel(ctx)
	resp, sc := open(t, c1, srv.URL, "")
	for i := range 5 {
		e.ask(t, fmt.Sprintf("a%d.example.net.", i), dns.TypeA, dns.ClassINET)
	}
	first := readEvents(t, sc, 3)
	cancel1() // disconnect mid-stream
	resp.Body.Close()

	// While disconnected.
	for i := range 5 {
		e.ask(t, fmt.Sprintf("b%d.example.net.", i), dns.TypeA, dns.ClassINET)
	}
	e.flush(t)
	resp2, sc2 := open(t, ctx, srv.URL, strconv.FormatInt(first[len(first)-1].id, 10))
	defer resp2.Body.Close()
	// And after resuming.
	go func() {
		for i := range 5 {
			m := new(dns.Msg)
			m.SetQuestion(fmt.Sprintf("c%d.example.net.", i), dns.TypeA)
			_, _, _ = (&dns.Client{Timeout: 3 * time.Second}).Exchange(m, e.addr)
		}
	}()
	rest := readEvents(t, sc2, 12)

	all := append(first, rest...)
	var names []string
	for i, ev := range all {
		if ev.item.ID != ev.id {
			t.Fatalf("event id %d carries row %d", ev.id, ev.item.ID)
		}
		if i > 0 && ev.id != all[i-1].id+1 {
			t.Fatalf("ids not consecutive: %d after %d", ev.id, all[i-1].id)
		}
		names = append(names, strings.SplitN(ev.item.Domain, ".", 2)[0])
	}
	want := "a0 a1 a2 a3 a4 b0 b1 b2 b3 b4 c0 c1 c2 c3 c4"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("events %s, want %s", got, want)
	}
}

func TestStreamFilterAndBadRequests(t *testing.T) {
	e := newEnv(t, querylog.DefaultConfig(), querylog.Options{FlushInterval: 10 * time.Millisecond})
	srv := httptest.NewServer(e.w.StreamHandler(querylog.StreamOptions{Heartbeat: 20 * time.Millisecond}))
	defer srv.Close()
	for _, q := range []string{"?status=bogus", "?limit=0", "?since=yesterday"} {
		resp, err := http.Get(srv.URL + q)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", q, resp.StatusCode)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, sc := open(t, ctx, srv.URL+"?status_class=blocked", "0")
	defer resp.Body.Close()
	e.ask(t, "fine.example.net.", dns.TypeA, dns.ClassINET)
	e.ask(t, "ads.example.org.", dns.TypeA, dns.ClassINET)
	ev := readEvents(t, sc, 1)
	if ev[0].item.Domain != "ads.example.org" || ev[0].item.StatusClass != "blocked" {
		t.Fatalf("filtered stream sent %+v", ev[0].item)
	}
	// Heartbeats keep coming.
	deadline := time.Now().Add(5 * time.Second)
	for sc.Scan() && time.Now().Before(deadline) {
		if sc.Text() == ": ping" {
			return
		}
	}
	t.Fatal("no heartbeat")
}

// TestEmptyPageThenTailMissesNothing: the dashboard reads a filtered page,
// finds it empty, and opens the live tail. A matching row written between
// the two used to be lost (the tail started live); the page's newest_id
// is where the tail resumes, so the row arrives, and rows older than the
// page are not repeated.
func TestEmptyPageThenTailMissesNothing(t *testing.T) {
	e := newEnv(t, querylog.DefaultConfig(), querylog.Options{FlushInterval: 10 * time.Millisecond})
	srv := httptest.NewServer(e.w.StreamHandler(querylog.StreamOptions{Heartbeat: 50 * time.Millisecond}))
	defer srv.Close()
	e.ask(t, "before.example.net.", dns.TypeA, dns.ClassINET)
	e.ask(t, "other.example.net.", dns.TypeA, dns.ClassINET)
	e.flush(t)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	f, err := querylog.ParseFilter(map[string][]string{"domain": {"gap.example.net"}})
	if err != nil {
		t.Fatal(err)
	}
	page, err := e.w.List(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 0 || page.NewestID == 0 {
		t.Fatalf("page: %d items, newest_id %d; want none and the log's newest id", len(page.Items), page.NewestID)
	}
	// The gap: written after the page, before the tail is open.
	e.ask(t, "gap.example.net.", dns.TypeA, dns.ClassINET)
	e.flush(t)

	resp, sc := open(t, ctx, srv.URL+"?domain=gap.example.net&last_event_id="+strconv.FormatInt(page.NewestID, 10), "")
	defer resp.Body.Close()
	ev := readEvents(t, sc, 1)
	if ev[0].item.Domain != "gap.example.net" || ev[0].id <= page.NewestID {
		t.Fatalf("tail after newest_id %d sent %d %s, want the gap's row", page.NewestID, ev[0].id, ev[0].item.Domain)
	}
	// Unfiltered from the same point: only rows newer than the page.
	resp2, sc2 := open(t, ctx, srv.URL+"?last_event_id="+strconv.FormatInt(page.NewestID, 10), "")
	defer resp2.Body.Close()
	if ev := readEvents(t, sc2, 1); ev[0].item.Domain != "gap.example.net" {
		t.Fatalf("unfiltered tail after newest_id repeated an older row: %s", ev[0].item.Domain)
	}
}
