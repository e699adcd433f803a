package listfetch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const body = "0.0.0.0 ads.example\n||track.example^\n"

func digestOf(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func newFetcher(t *testing.T, dir string, mod func(*Options)) *Fetcher {
	t.Helper()
	o := Options{Dir: dir, AllowLocal: true, Timeout: 5 * time.Second}
	if mod != nil {
		mod(&o)
	}
	f, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestConditionalGETWithETagAndRestart(t *testing.T) {
	var hits, conditional atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.Header.Get("If-None-Match") == `"v1"` {
			conditional.Add(1)
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", `"v1"`)
		io.WriteString(w, body)
	}))
	defer srv.Close()
	dir := t.TempDir()
	f := newFetcher(t, dir, nil)
	ctx := context.Background()

	r1, err := f.Fetch(ctx, srv.URL+"/list.txt")
	if err != nil {
		t.Fatal(err)
	}
	if r1.NotModified || r1.Digest != digestOf(body) || r1.ETag != `"v1"` || r1.Size != int64(len(body)) {
		t.Fatalf("first fetch = %+v", r1)
	}
	got, err := os.ReadFile(r1.Path)
	if err != nil || string(got) != body {
		t.Fatalf("cached body = %q, %v", got, err)
	}

	r2, err := f.Fetch(ctx, srv.URL+"/list.txt")
	if err != nil {
		t.Fatal(err)
	}
	if !r2.NotModified || r2.Digest != r1.Digest || r2.Path != r1.Path || !r2.FetchedAt.After(r1.FetchedAt.Add(-time.Nanosecond)) {
		t.Fatalf("second fetch = %+v", r2)
	}

	// A restarted process finds the index and the body and still asks
	// conditionally.
	f2 := newFetcher(t, dir, nil)
	if c, ok := f2.Cached(srv.URL + "/list.txt"); !ok || c.Digest != r1.Digest {
		t.Fatalf("Cached after restart = %+v, %v", c, ok)
	}
	r3, err := f2.Fetch(ctx, srv.URL+"/list.txt")
	if err != nil || !r3.NotModified {
		t.Fatalf("fetch after restart = %+v, %v", r3, err)
	}
	if hits.Load() != 3 || conditional.Load() != 2 {
		t.Errorf("hits %d conditional %d, want 3 and 2", hits.Load(), conditional.Load())
	}
	fh, err := f2.Open(r1.Digest)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if b, _ := io.ReadAll(fh); string(b) != body {
		t.Errorf("Open(digest) = %q", b)
	}
}

func TestLastModifiedAndChangedBody(t *testing.T) {
	lm := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Format(http.TimeFormat)
	var version atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if version.Load() == 0 && r.Header.Get("If-Modified-Since") == lm {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("Last-Modified", lm)
		fmt.Fprintf(w, "v%d.example\n", version.Load())
	}))
	defer srv.Close()
	f := newFetcher(t, t.TempDir(), nil)
	ctx := context.Background()
	r1, err := f.Fetch(ctx, srv.URL)
	if err != nil || r1.LastModified != lm {
		t.Fatalf("fetch = %+v, %v", r1, err)
	}
	if r2, err := f.Fetch(ctx, srv.URL); err != nil || !r2.NotModified {
		t.Fatalf("conditional fetch = %+v, %v", r2, err)
	}
	version.Store(1)
	r3, err := f.Fetch(ctx, srv.URL)
	if err != nil || r3.NotModified || r3.Digest != digestOf("v1.example\n") {
		t.Fatalf("changed fetch = %+v, %v", r3, err)
	}
	if !r3.Due(time.Hour, r3.FetchedAt.Add(time.Hour)) || r3.Due(time.Hour, r3.FetchedAt.Add(time.Minute)) {
		t.Error("Due does not follow the refresh interval")
	}
}

func TestLimitsAndFailures(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, strings.Repeat("a.example\n", 500))
	})
	mux.HandleFunc("/big-chunked", func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i < 50; i++ {
			io.WriteString(w, strings.Repeat("a.example\n", 10))
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i < 100; i++ {
			if _, err := io.WriteString(w, "a.example\n"); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
	mux.HandleFunc("/error", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "broken", http.StatusInternalServerError)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/loop", http.StatusFound)
	})
	mux.HandleFunc("/to-ftp", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "ftp://example.com/list", http.StatusFound)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	f := newFetcher(t, t.TempDir(), func(o *Options) {
		o.MaxBodyBytes = 1000
		o.Timeout = 500 * time.Millisecond
	})
	tests := []struct {
		path    string
		wantErr error
		substr  string
	}{
		{"/big", ErrTooLarge, ""},
		{"/big-chunked", ErrTooLarge, ""},
		{"/slow", context.DeadlineExceeded, ""},
		{"/error", nil, "500"},
		{"/loop", nil, "redirects"},
		{"/to-ftp", ErrScheme, ""},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			start := time.Now()
			r, err := f.Fetch(context.Background(), srv.URL+tc.path)
			if err == nil {
				t.Fatalf("no error, result %+v", r)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("err = %v, want %v", err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.substr) {
				t.Errorf("err = %v, want it to mention %q", err, tc.substr)
			}
			if r.Degraded || r.Path != "" {
				t.Errorf("result without cache = %+v", r)
			}
			if time.Since(start) > 3*time.Second {
				t.Errorf("took %v: time limit not applied", time.Since(start))
			}
		})
	}
	for _, raw := range []string{"ftp://example.com/x", "file:///etc/passwd", "://bad", "http://[::1"} {
		if _, err := f.Fetch(context.Background(), raw); err == nil {
			t.Errorf("Fetch(%q) succeeded", raw)
		}
	}
}

func TestDegradedServesCachedBody(t *testing.T) {
	var down atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		io.WriteString(w, body)
	}))
	defer srv.Close()
	f := newFetcher(t, t.TempDir(), nil)
	good, err := f.Fetch(context.Background(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	down.Store(true)
	r, err := f.Fetch(context.Background(), srv.URL)
	if err == nil || !r.Degraded || r.Digest != good.Digest || r.Path == "" {
		t.Fatalf("degraded fetch = %+v, %v", r, err)
	}
}

func TestLoopbackRefusedUnlessAllowed(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, body)
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	f := newFetcher(t, t.TempDir(), func(o *Options) { o.AllowLocal = false })
	// By address, and by a name that resolves to loopback (the check runs
	// on the dialled address, so DNS answers cannot sneak past it).
	for _, u := range []string{srv.URL, "http://localhost:" + port + "/"} {
		if _, err := f.Fetch(context.Background(), u); !errors.Is(err, ErrForbiddenAddress) {
			t.Errorf("Fetch(%s) err = %v, want ErrForbiddenAddress", u, err)
		}
	}
	allowed := newFetcher(t, t.TempDir(), nil)
	if _, err := allowed.Fetch(context.Background(), srv.URL); err != nil {
		t.Errorf("allowLocal fetch: %v", err)
	}
}

// A redirect is checked on the address it dials: the test may only use
// loopback, so it refuses 127.0.0.2 and allows 127.0.0.1.
func TestRedirectToRefusedAddress(t *testing.T) {
	target := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, body)
	}))
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("127.0.0.2 not available: %v", err)
	}
	target.Listener = ln
	target.Start()
	defer target.Close()
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/list", http.StatusFound)
	}))
	defer front.Close()
	f := newFetcher(t, t.TempDir(), func(o *Options) {
		o.AllowLocal = false
		o.refuse = func(a netip.Addr) bool { return a == netip.MustParseAddr("127.0.0.2") }
	})
	if _, err := f.Fetch(context.Background(), front.URL); !errors.Is(err, ErrForbiddenAddress) {
		t.Errorf("redirect err = %v, want ErrForbiddenAddress", err)
	}
}

func TestRefusedAddresses(t *testing.T) {
	tests := map[string]bool{
		"127.0.0.1": true, "::1": true, "169.254.169.254": true, "fe80::1": true,
		"0.0.0.0": true, "::": true, "224.0.0.1": true, "ff02::1": true, "::ffff:127.0.0.1": true,
		"10.0.0.1": false, "192.168.1.1": false, "172.16.0.1": false, "fd00::1": false, "93.184.216.34": false,
	}
	for a, want := range tests {
		if got := refused(netip.MustParseAddr(a)); got != want {
			t.Errorf("refused(%s) = %v, want %v", a, got, want)
		}
	}
}

func TestStoreVerifiesDigestAndParseSlots(t *testing.T) {
	f := newFetcher(t, t.TempDir(), nil)
	ctx := context.Background()
	if _, err := f.Store(ctx, strings.NewReader(body), digestOf("other")); err == nil {
		t.Error("Store accepted a body with the wrong digest")
	}
	p, err := f.Store(ctx, strings.NewReader(body), digestOf(body))
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != body {
		t.Errorf("stored %q", b)
	}
	if _, err := f.Open("../../etc/passwd"); err == nil {
		t.Error("Open accepted a path")
	}

	var releases []func()
	for i := 0; i < DefaultMaxParses; i++ {
		rel, err := f.AcquireParse(ctx)
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, rel)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := f.AcquireParse(short); err == nil {
		t.Error("a fifth parse slot was granted")
	}
	releases[0]()
	if rel, err := f.AcquireParse(ctx); err != nil {
		t.Error(err)
	} else {
		rel()
	}
}

func TestPruneKeepsIndexedBodies(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, body)
	}))
	defer srv.Close()
	f := newFetcher(t, t.TempDir(), nil)
	r, err := f.Fetch(context.Background(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	orphan, err := f.Store(context.Background(), strings.NewReader("x\n"), digestOf("x\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Prune(map[string]bool{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(r.Path); err != nil {
		t.Error("indexed body pruned")
	}
	if _, err := os.Stat(orphan); err == nil {
		t.Error("orphan body kept")
	}
}
