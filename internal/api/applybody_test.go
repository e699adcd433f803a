package api

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svcdns/svc/internal/store"
)

// bigObject is one BlockList of about size bytes made of many short
// entries: the shape that decodes into the most heap per byte.
func bigObject(name string, size int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"apiVersion":"service.io/v1alpha1","kind":"BlockList","metadata":{"name":%q},"spec":{"sources":[{"name":"s","inline":[`, name)
	for i := 0; b.Len() < size; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"a%d.example"`, i)
	}
	b.WriteString(`]}]}}`)
	return b.Bytes()
}

// peakHeap runs f while sampling HeapInuse and returns the peak above
// the level before f.
func peakHeap(f func()) uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var peak atomic.Uint64
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(500 * time.Microsecond)
		defer t.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	f()
	close(done)
	<-sampled
	if p := peak.Load(); p > base {
		return p - base
	}
	return 0
}

// TestApplyLargeBodyBoundedHeap: a 12 MiB object is refused with 413 once
// the 1.5 MiB cap is read, and the heap it takes stays under 3x the cap,
// alone and four at once (before the streaming read: ~300 MB each).
func TestApplyLargeBodyBoundedHeap(t *testing.T) {
	e := newEnv(t)
	c := e.withToken(e.adminToken())
	body := bigObject("big", 12<<20)
	check := func(r resp) {
		t.Helper()
		if r.code != 413 || r.errKey(t) != KeyTooLarge || !strings.Contains(string(r.body), fmt.Sprint(store.MaxObjectBytes)) {
			t.Errorf("12 MiB object: %d %.300s", r.code, r.body)
		}
	}
	var one resp
	peak := peakHeap(func() { one = c.do("POST", "/apply", body) })
	check(one)
	t.Logf("one 12 MiB body: peak heap +%.1f MiB (cap %.1f MiB)", float64(peak)/(1<<20), float64(store.MaxObjectBytes)/(1<<20))
	// json.Decoder's doubling read buffer made it ~5.5x; the scanner's one
	// scratch buffer about 1x.
	if limit := uint64(3 * store.MaxObjectBytes); peak > limit {
		t.Errorf("one 12 MiB body: peak heap +%d bytes, want under %d (3x the object cap)", peak, limit)
	}
	var wg sync.WaitGroup
	res := make([]resp, 4)
	peak = peakHeap(func() {
		for i := range res {
			wg.Add(1)
			go func() { defer wg.Done(); res[i] = e.withToken(c.token).do("POST", "/apply", body) }()
		}
		wg.Wait()
	})
	for _, r := range res {
		check(r)
	}
	t.Logf("four 12 MiB bodies at once: peak heap +%.1f MiB", float64(peak)/(1<<20))
	if limit := uint64(4 * 3 * store.MaxObjectBytes); peak > limit {
		t.Errorf("four 12 MiB bodies: peak heap +%d bytes, want under %d", peak, limit)
	}
	// Objects under the cap in a List larger than the cap still apply.
	list := fmt.Sprintf(`{"kind":"List","apiVersion":"v1","items":[%s,%s]}`, bigObject("l1", 900<<10), bigObject("l2", 900<<10))
	if r := c.do("POST", "/apply", list); r.code != 200 {
		t.Errorf("List of two 900 KiB objects: %d %.300s", r.code, r.body)
	}
}

// TestApplyBodyLimits: the whole body is bounded (413 naming the limit),
// and malformed or non-UTF-8 bodies are 400 naming the place.
func TestApplyBodyLimits(t *testing.T) {
	e := newEnv(t)
	c := e.withToken(e.adminToken())
	var arr bytes.Buffer
	arr.WriteByte('[')
	for i := 0; arr.Len() < maxBulkBody+(1<<20); i++ {
		if i > 0 {
			arr.WriteByte(',')
		}
		arr.Write(bigObject(fmt.Sprintf("o%d", i), 900<<10))
	}
	arr.WriteByte(']')
	invalid := []byte(`{"apiVersion":"service.io/v1alpha1","kind":"BlockList","metadata":{"name":"u"},"spec":{"sources":[{"name":"s","inline":["ok.example","bad` + "\xff" + `.example"]}]}}`)
	for _, tc := range []struct {
		name string
		body []byte
		code int
		key  string
		want string
	}{
		{"body over 16 MiB", arr.Bytes(), 413, KeyTooLarge, fmt.Sprint(maxBulkBody)},
		{"invalid UTF-8", invalid, 400, KeyInvalid, "spec.sources[0].inline[1]"},
		{"empty", nil, 400, KeyInvalid, "object or an array"},
		{"truncated", []byte(`[{"kind":"BlockList"`), 400, KeyInvalid, "body"},
		{"trailing", []byte(`{"kind":"x"} {}`), 400, KeyInvalid, "trailing"},
		{"not an object", []byte(`[1]`), 400, KeyInvalid, "body[0]"},
	} {
		r := c.do("POST", "/apply", tc.body)
		if r.code != tc.code || r.errKey(t) != tc.key || !strings.Contains(string(r.body), tc.want) {
			t.Errorf("%s: %d %.300s, want %d %s naming %q", tc.name, r.code, r.body, tc.code, tc.key, tc.want)
		}
	}
}

// TestDotSegmentsErrorBody: "." and ".." path segments, sent raw over the
// listener, get the API's JSON error body, not ServeMux's 307 redirect.
func TestDotSegmentsErrorBody(t *testing.T) {
	e := newEnv(t)
	addr := strings.TrimPrefix(e.http.URL, "http://")
	for _, p := range []string{"/./healthz", "/x/../healthz", "/%2e%2e/healthz", "/a/."} {
		conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		path := e.srv.BasePath() + p
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path)
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			conn.Close()
			t.Fatalf("%s: %v", path, err)
		}
		b, _ := io.ReadAll(res.Body)
		conn.Close()
		r := resp{code: res.StatusCode, hdr: res.Header, body: b}
		if r.code != 400 || r.hdr.Get("Content-Type") != "application/json" || r.errKey(t) != KeyInvalid {
			t.Errorf("%s: %d %s %.200s, want 400 JSON invalid", path, r.code, r.hdr.Get("Content-Type"), r.body)
		}
	}
}

// TestDNSQueryInvalidUTF8: a /dns/query name with invalid UTF-8 is 400
// naming the field instead of being sent upstream with U+FFFD.
func TestDNSQueryInvalidUTF8(t *testing.T) {
	e := newEnv(t)
	c := e.withToken(e.adminToken())
	r := c.do("POST", "/dns/query", []byte(`{"name":"www.ex`+"\xff"+`ample.com"}`))
	if r.code != 400 || r.errKey(t) != KeyInvalid || !strings.Contains(string(r.body), "name: invalid UTF-8") {
		t.Errorf("invalid UTF-8 name: %d %.300s", r.code, r.body)
	}
}
