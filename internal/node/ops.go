package node

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// ReadinessCheck reports why the node cannot serve yet; nil means ready.
type ReadinessCheck func() error

// Ops serves the ops listener: liveness, readiness and lameduck. It needs no login;
// lameduck is accepted from loopback peers only.
type Ops struct {
	life            *Lifecycle
	defaultLameduck time.Duration

	mu     sync.RWMutex
	checks map[string]ReadinessCheck
	live   map[string]ReadinessCheck
}

// NewOps returns the ops handler over a lifecycle.
func NewOps(life *Lifecycle, defaultLameduck time.Duration) *Ops {
	return &Ops{life: life, defaultLameduck: defaultLameduck, checks: map[string]ReadinessCheck{}, live: map[string]ReadinessCheck{}}
}

// AddLiveCheck adds a named liveness check: a failing one makes
// /healthz/live answer 503, so the kubelet restarts the process.
func (o *Ops) AddLiveCheck(name string, c ReadinessCheck) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.live[name] = c
}

// AddCheck adds a named readiness check.
func (o *Ops) AddCheck(name string, c ReadinessCheck) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.checks[name] = c
}

type readiness struct {
	Ready    bool              `json:"ready"`
	Lameduck bool              `json:"lameduck"`
	Until    *time.Time        `json:"until,omitempty"`
	Failing  map[string]string `json:"failing,omitempty"`
}

func (o *Ops) readiness() readiness {
	r := readiness{Ready: true}
	if ld, until := o.life.State(); ld {
		r.Ready, r.Lameduck, r.Until = false, true, &until
	}
	if failing := runChecks(&o.mu, o.checks); len(failing) > 0 {
		r.Ready, r.Failing = false, failing
	}
	return r
}

// runChecks runs checks (read under mu) and returns the failing ones by
// name; nil when all pass.
func runChecks(mu *sync.RWMutex, checks map[string]ReadinessCheck) map[string]string {
	mu.RLock()
	defer mu.RUnlock()
	var failing map[string]string
	for n, c := range checks {
		if err := c(); err != nil {
			if failing == nil {
				failing = map[string]string{}
			}
			failing[n] = err.Error()
		}
	}
	return failing
}

// Handler serves /healthz/live, /healthz/ready and POST /lameduck.
func (o *Ops) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz/live", func(w http.ResponseWriter, _ *http.Request) {
		failing := runChecks(&o.mu, o.live)
		if len(failing) > 0 {
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"live": false, "failing": failing})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"live": true})
	})
	mux.HandleFunc("GET /healthz/ready", func(w http.ResponseWriter, _ *http.Request) {
		r := o.readiness()
		status := http.StatusOK
		if !r.Ready {
			status = http.StatusServiceUnavailable
		}
		writeJSON(w, status, r)
	})
	mux.HandleFunc("POST /lameduck", o.lameduck)
	return mux
}

// lameduckRequest is the body of POST /lameduck; both fields may also be given
// as query parameters (?duration=30s, ?cancel=true).
type lameduckRequest struct {
	Duration string `json:"duration,omitempty"`
	Cancel   bool   `json:"cancel,omitempty"`
}

func (o *Ops) lameduck(w http.ResponseWriter, r *http.Request) {
	if !fromLoopback(r.RemoteAddr) {
		writeError(w, http.StatusForbidden, "forbidden", "lameduck is accepted from loopback only")
		return
	}
	var req lameduckRequest
	body, err := io.ReadAll(io.LimitReader(r.Body, 4096))
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid", "reading body: "+err.Error())
		return
	}
	if len(body) > 0 {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			writeError(w, http.StatusBadRequest, "invalid", "body: "+err.Error())
			return
		}
	}
	q := r.URL.Query()
	if v := q.Get("duration"); v != "" {
		req.Duration = v
	}
	if v := q.Get("cancel"); v == "true" || v == "1" {
		req.Cancel = true
	}
	if req.Cancel {
		if !o.life.Cancel() {
			writeError(w, http.StatusConflict, "conflict", "the node is not in a lameduck period that can be cancelled")
			return
		}
		writeJSON(w, http.StatusOK, o.readiness())
		return
	}
	d := o.defaultLameduck
	if req.Duration != "" {
		d, err = time.ParseDuration(req.Duration)
		if err != nil || d < 0 {
			writeError(w, http.StatusBadRequest, "invalid", fmt.Sprintf("duration: %q is not a duration such as 30s", req.Duration))
			return
		}
	}
	o.life.Lameduck(d)
	writeJSON(w, http.StatusAccepted, o.readiness())
}

func fromLoopback(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		return false
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, key, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"key": key, "message": msg}})
}
