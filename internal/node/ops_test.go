package node

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func get(t *testing.T, url string) (int, readiness) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r readiness
	_ = json.NewDecoder(resp.Body).Decode(&r)
	return resp.StatusCode, r
}

func post(t *testing.T, url, body string) int {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestOpsReadinessAndLameduck(t *testing.T) {
	var switches []bool
	life := NewLifecycle(func(ld bool) { switches = append(switches, ld) })
	ops := NewOps(life, time.Hour)
	storeErr := errors.New("store not synced")
	ops.AddCheck("store", func() error { return storeErr })
	srv := httptest.NewServer(ops.Handler())
	defer srv.Close()

	if code, _ := get(t, srv.URL+"/healthz/live"); code != 200 {
		t.Fatalf("live = %d, want 200", code)
	}
	code, r := get(t, srv.URL+"/healthz/ready")
	if code != 503 || r.Failing["store"] != "store not synced" {
		t.Fatalf("ready with failing check = %d %+v, want 503 naming the store", code, r)
	}
	storeErr = nil
	if code, _ := get(t, srv.URL+"/healthz/ready"); code != 200 {
		t.Fatalf("ready = %d, want 200", code)
	}

	if code := post(t, srv.URL+"/lameduck", `{"duration":"bogus"}`); code != 400 {
		t.Fatalf("bad duration = %d, want 400", code)
	}
	if code := post(t, srv.URL+"/lameduck", `{"unknown":1}`); code != 400 {
		t.Fatalf("unknown field = %d, want 400", code)
	}
	if code := post(t, srv.URL+"/lameduck", `{"duration":"1h"}`); code != 202 {
		t.Fatalf("lameduck = %d, want 202", code)
	}
	code, r = get(t, srv.URL+"/healthz/ready")
	if code != 503 || !r.Lameduck {
		t.Fatalf("ready in lameduck = %d %+v, want 503 lameduck", code, r)
	}
	if code := post(t, srv.URL+"/lameduck?cancel=true", ""); code != 200 {
		t.Fatalf("cancel = %d, want 200", code)
	}
	if code, _ := get(t, srv.URL+"/healthz/ready"); code != 200 {
		t.Fatalf("ready after cancel = %d, want 200", code)
	}
	if code := post(t, srv.URL+"/lameduck?cancel=true", ""); code != 409 {
		t.Fatalf("cancel while serving = %d, want 409", code)
	}
	if len(switches) != 2 || !switches[0] || switches[1] {
		t.Fatalf("switches = %v, want [true false]", switches)
	}
}

func TestLameduckRunsOutAndCloses(t *testing.T) {
	life := NewLifecycle(nil)
	life.Lameduck(20 * time.Millisecond)
	select {
	case <-life.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("lameduck period did not end")
	}
	if life.Cancel() {
		t.Fatal("cancel after the period ran out must fail")
	}
}

func TestLameduckOnlyFromLoopback(t *testing.T) {
	for _, tc := range []struct {
		remote string
		want   bool
	}{
		{"127.0.0.1:5000", true},
		{"[::1]:5000", true},
		{"[::ffff:127.0.0.1]:1", true},
		{"192.168.1.2:5000", false},
		{"[2001:db8::1]:53", false},
		{"garbage", false},
	} {
		if got := fromLoopback(tc.remote); got != tc.want {
			t.Errorf("fromLoopback(%q) = %v, want %v", tc.remote, got, tc.want)
		}
	}
	ops := NewOps(NewLifecycle(nil), time.Hour)
	req := httptest.NewRequest("POST", "/lameduck", nil)
	req.RemoteAddr = "10.1.2.3:4444"
	rec := httptest.NewRecorder()
	ops.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden {
		t.Fatalf("lameduck from 10.1.2.3 = %d, want 403", rec.Code)
	}
}
