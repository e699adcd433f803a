package api

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// stalledPlane stands in for a node's data plane that has not built a
// snapshot with the writes yet (served false), or has (served true). It
// records what each request asked it to wait for.
type stalledPlane struct {
	served bool
	mu     sync.Mutex
	asked  [][]StoreWrite
}

func (p *stalledPlane) WaitVisible(ctx context.Context, ws []StoreWrite) (string, bool) {
	p.mu.Lock()
	p.asked = append(p.asked, ws)
	p.mu.Unlock()
	if p.served {
		return "42", true
	}
	<-ctx.Done()
	return "41", false
}

func (p *stalledPlane) last() []StoreWrite {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.asked) == 0 {
		return nil
	}
	return p.asked[len(p.asked)-1]
}

func visibilityEnv(t *testing.T, plane *stalledPlane) (*testEnv, *client) {
	t.Helper()
	e := newEnv(t, func(o *Options, d *Deps) {
		d.Visibility = plane
		o.WriteVisibleTimeout = 300 * time.Millisecond
	})
	c := e.withToken(e.adminToken())
	r := c.do("POST", "/apply", map[string]any{"apiVersion": "service.io/v1alpha1", "kind": "DNSZone",
		"metadata": map[string]any{"name": "home.lan"}, "spec": map[string]any{"nameServers": []string{"ns1.home.lan."}}})
	if r.code != 200 {
		t.Fatalf("apply zone: %d %s", r.code, r.body)
	}
	return e, c
}

// TestWriteWaitRunsOut: when this node's data plane does not answer with a
// write within the wait, the write is stored and answered as usual, and the
// answer says it is not served yet (never an error, never a hang).
func TestWriteWaitRunsOut(t *testing.T) {
	plane := &stalledPlane{}
	_, c := visibilityEnv(t, plane)
	start := time.Now()
	r := c.do("POST", "/zones/home.lan/records", map[string]any{"name": "printer", "type": "A", "targets": []string{"192.0.2.30"}})
	took := time.Since(start)
	if r.code != 200 {
		t.Fatalf("records add: %d %s", r.code, r.body)
	}
	if took < 300*time.Millisecond || took > 5*time.Second {
		t.Errorf("records add took %v; the wait is 300ms", took)
	}
	if got := r.hdr.Get(HeaderVisible); got != "false" {
		t.Errorf("%s: %q, want false", HeaderVisible, got)
	}
	if got := r.hdr.Get(HeaderRevision); got != "41" {
		t.Errorf("%s: %q, want the served snapshot's 41", HeaderRevision, got)
	}
	if w := r.hdr.Get("Warning"); !strings.Contains(w, "stored, but this node does not answer with it yet") {
		t.Errorf("Warning: %q", w)
	}
	ws := plane.last()
	rv, _ := r.json(t)["resourceVersion"].(string)
	if len(ws) != 1 || ws[0].Kind != "DNSRecordSet" || ws[0].Name != "api-home.lan" || ws[0].ResourceVersion != rv || rv == "" {
		t.Errorf("waited for %+v, want the record set at the answer's resourceVersion %q", ws, rv)
	}
	if g := c.do("GET", "/objects/dnsrecordsets/default/api-home.lan", nil); !strings.Contains(string(g.body), "192.0.2.30") {
		t.Errorf("the record was not stored: %s", g.body)
	}
	// X-Service-Wait: 0 answers at once, and a bad value is refused naming the header.
	start = time.Now()
	r = c.do("POST", "/zones/home.lan/records", map[string]any{"name": "nas", "type": "A", "targets": []string{"192.0.2.10"}}, HeaderWait, "0")
	if r.code != 200 || time.Since(start) > 250*time.Millisecond || r.hdr.Get(HeaderVisible) != "false" {
		t.Errorf("X-Service-Wait: 0: %d after %v, visible %q", r.code, time.Since(start), r.hdr.Get(HeaderVisible))
	}
	r = c.do("POST", "/zones/home.lan/records", map[string]any{"name": "nas", "type": "A", "targets": []string{"192.0.2.11"}}, HeaderWait, "soon")
	if r.code != http.StatusBadRequest || !strings.Contains(string(r.body), HeaderWait) {
		t.Errorf("X-Service-Wait: soon: %d %s", r.code, r.body)
	}
}

// TestWriteWaitServed: a served write answers at once with the revision;
// reads, refused writes and writes of kinds no answer depends on are noted
// as such.
func TestWriteWaitServed(t *testing.T) {
	plane := &stalledPlane{served: true}
	_, c := visibilityEnv(t, plane)
	r := c.do("DELETE", "/zones/home.lan", nil)
	if r.code >= 300 || r.hdr.Get(HeaderVisible) != "true" || r.hdr.Get(HeaderRevision) != "42" {
		t.Errorf("zone delete: %d visible %q revision %q", r.code, r.hdr.Get(HeaderVisible), r.hdr.Get(HeaderRevision))
	}
	if ws := plane.last(); len(ws) != 1 || ws[0].Kind != "DNSZone" || !ws[0].Deleted {
		t.Errorf("zone delete waited for %+v", ws)
	}
	n := len(plane.asked)
	if r := c.do("GET", "/zones", nil); r.hdr.Get(HeaderVisible) != "" || len(plane.asked) != n {
		t.Errorf("a read waited")
	}
	if r := c.do("POST", "/zones/nowhere.lan/records", map[string]any{"name": "x", "type": "A", "targets": []string{"192.0.2.1"}}); r.code < 400 || len(plane.asked) != n {
		t.Errorf("a refused write waited: %d", r.code)
	}
	r = c.do("PATCH", "/settings", map[string]any{"blocking": map[string]any{"enabled": false}}, "Content-Type", "application/merge-patch+json")
	if r.code == 200 {
		if ws := plane.last(); len(ws) != 1 || !ws[0].Settings {
			t.Errorf("settings patch waited for %+v", ws)
		}
	}
}
