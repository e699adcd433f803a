package vip

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// InstanceStatus is one VIP as svc health --vrrp and /status show it.
type InstanceStatus struct {
	Instance
	State string    `json:"state"`
	Since time.Time `json:"since,omitzero"`
}

// Status is the VIP supervisor's state read from its run dir.
type Status struct {
	RunDir       string           `json:"runDir"`
	Running      bool             `json:"keepalivedRunning"`
	PID          int              `json:"pid,omitempty"`
	Error        string           `json:"error,omitempty"`
	Drained      bool             `json:"drained"`
	ProbeFailure string           `json:"probeFailure,omitempty"`
	Self         string           `json:"self"`
	Peers        []string         `json:"peers"`
	Auth         string           `json:"auth"`
	Transitions  int              `json:"transitions"`
	Instances    []InstanceStatus `json:"instances"`
}

// ReadStatus assembles the status from the files in runDir.
func ReadStatus(runDir string) (Status, error) {
	st := Status{RunDir: runDir}
	plan, err := ReadPlan(runDir)
	if err != nil {
		return st, err
	}
	states, err := ReadState(runDir)
	if err != nil {
		return st, err
	}
	st.Self, st.Peers, st.Auth, st.Transitions = plan.Self, plan.Peers, plan.Auth, states.Transitions
	st.Drained = Drained(runDir)
	if b, err := os.ReadFile(filepath.Join(runDir, ProbeFile)); err == nil {
		st.ProbeFailure = strings.TrimSpace(string(b))
	}
	if pid, err := KeepalivedPID(runDir); err == nil {
		st.Running, st.PID = true, pid
	} else {
		st.Error = err.Error()
	}
	for _, in := range plan.Instances {
		is := states.Instances[in.Name]
		state := is.State
		if state == "" {
			state = "UNKNOWN"
		}
		if !st.Running {
			state = "STOPPED"
		}
		st.Instances = append(st.Instances, InstanceStatus{Instance: in, State: state, Since: is.Since})
	}
	return st, nil
}

func (s *Supervisor) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if !s.running.Load() {
			s.mu.Lock()
			msg := s.lastErr
			s.mu.Unlock()
			http.Error(w, "keepalived not running: "+msg, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		st, err := ReadStatus(s.RunDir)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(st)
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		s.writeMetrics(w)
	})
	return mux
}

// writeMetrics writes the Prometheus text format by hand: a handful of
// series read from the run dir on each scrape.
func (s *Supervisor) writeMetrics(w http.ResponseWriter) {
	b01 := func(b bool) int {
		if b {
			return 1
		}
		return 0
	}
	st, _ := ReadStatus(s.RunDir)
	fmt.Fprintf(w, "# HELP svc_vip_keepalived_up Whether keepalived runs under svc vip run.\n# TYPE svc_vip_keepalived_up gauge\nsvc_vip_keepalived_up %d\n", b01(s.running.Load()))
	fmt.Fprintf(w, "# HELP svc_vip_keepalived_restarts_total Restarts of keepalived after it exited.\n# TYPE svc_vip_keepalived_restarts_total counter\nsvc_vip_keepalived_restarts_total %d\n", s.restarts.Load())
	fmt.Fprintf(w, "# HELP svc_vip_reloads_total Reloads of keepalived after a peer change.\n# TYPE svc_vip_reloads_total counter\nsvc_vip_reloads_total %d\n", s.reloads.Load())
	fmt.Fprintf(w, "# HELP svc_vip_transitions_total VRRP state changes keepalived notified.\n# TYPE svc_vip_transitions_total counter\nsvc_vip_transitions_total %d\n", st.Transitions)
	fmt.Fprintf(w, "# HELP svc_vip_drained Whether svc vip drain is in effect.\n# TYPE svc_vip_drained gauge\nsvc_vip_drained %d\n", b01(st.Drained))
	fmt.Fprintf(w, "# HELP svc_vip_state VRRP state of each VIP on this node (1 for the current state).\n# TYPE svc_vip_state gauge\n")
	for _, in := range st.Instances {
		for _, state := range []string{"MASTER", "BACKUP", "FAULT", "STOP", "UNKNOWN", "STOPPED"} {
			fmt.Fprintf(w, "svc_vip_state{vip=%q,address=%q,state=%q} %d\n", strings.TrimPrefix(in.Name, "svc_"), in.Address, state, b01(in.State == state))
		}
	}
	fmt.Fprintf(w, "# HELP svc_vip_priority Configured VRRP priority of each VIP on this node.\n# TYPE svc_vip_priority gauge\n")
	for _, in := range st.Instances {
		fmt.Fprintf(w, "svc_vip_priority{vip=%q,address=%q} %d\n", strings.TrimPrefix(in.Name, "svc_"), in.Address, in.Priority)
	}
}

// Masters are the addresses this node holds according to st.
func (st Status) Masters() []string {
	var out []string
	for _, in := range st.Instances {
		if in.State == "MASTER" {
			out = append(out, in.Address)
		}
	}
	slices.Sort(out)
	return out
}
