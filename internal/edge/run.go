package edge

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/svcdns/svc/dataplane/probe"
)

// APIKeyFile is where run keeps dnsdist's API key in --config-dir, for
// `svc health --dnsdist-api` (mode 0600).
const APIKeyFile = "api-key"

// PIDFile is where run keeps the running dnsdist's process ID in
// --config-dir (dnsdist 1.x has no pid file option of its own); it is
// removed when dnsdist exits.
const PIDFile = "dnsdist.pid"

// Supervisor is `svc edge run`.
type Supervisor struct {
	Template Config // the flags; Backends and Zones come from the sources
	Bin      string // dnsdist
	Dir      string // --config-dir
	Source   Source
	Nodes    *Nodes // nil: no zone polling nor cache flushes
	Poll     time.Duration
	Debounce time.Duration
	Drain    time.Duration
	Stop     time.Duration // --stop-timeout
	// HealthAddress serves /healthz/live and /healthz/ready.
	HealthAddress   string
	RequireBackends int
	Log             *slog.Logger

	console *Console
	running atomic.Bool // dnsdist is up and its console answered
	stopped atomic.Bool // shutting down: not ready
	mu      sync.Mutex
	applied applied // what dnsdist has
}

// applied is the state rendered into, or applied to, dnsdist.
type applied struct {
	backends []Backend
	zones    []string
	fp       string
}

// Run supervises dnsdist until ctx ends, then drains and stops it.
func (s *Supervisor) Run(ctx context.Context) error {
	if s.Log == nil {
		s.Log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("--config-dir: %w", err)
	}
	if err := s.genKeys(); err != nil {
		return err
	}
	s.console = &Console{Address: s.Template.Console, Timeout: 3 * time.Second}
	copy(s.console.Key[:], s.Template.ConsoleKey)

	desired, err := s.observe(ctx, applied{})
	if err != nil {
		s.Log.Warn("edge: first look at the backends and nodes failed; starting with what is known", "err", err)
	}
	hctx, hcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer hcancel()
	if err := s.serveHealth(hctx); err != nil {
		return err
	}

	backoff := 500 * time.Millisecond
	for {
		started := time.Now()
		proc, exited, err := s.start(ctx, desired)
		if err != nil {
			return err // a configuration dnsdist refuses does not get better by retrying
		}
		desired = s.follow(ctx, exited)
		s.running.Store(false)
		if ctx.Err() != nil {
			s.shutdown(proc, exited)
			return nil
		}
		if time.Since(started) > 30*time.Second {
			backoff = 500 * time.Millisecond
		}
		s.Log.Warn("edge: dnsdist exited; restarting", "after", backoff)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return nil
		}
		backoff = min(backoff*2, 30*time.Second)
	}
}

// genKeys makes the console and API keys of this run: never logged,
// only in the 0600 configuration and, for the API key, APIKeyFile.
func (s *Supervisor) genKeys() error {
	if len(s.Template.ConsoleKey) != 32 {
		s.Template.ConsoleKey = make([]byte, 32)
		if _, err := rand.Read(s.Template.ConsoleKey); err != nil {
			return err
		}
	}
	if s.Template.APIKey == "" {
		k := make([]byte, 24)
		if _, err := rand.Read(k); err != nil {
			return err
		}
		s.Template.APIKey = hex.EncodeToString(k)
	}
	return os.WriteFile(filepath.Join(s.Dir, APIKeyFile), []byte(s.Template.APIKey+"\n"), 0o600)
}

// observe asks the sources for the backends and the nodes for zones and
// the flush fingerprint; what cannot be learnt keeps its last value.
func (s *Supervisor) observe(ctx context.Context, last applied) (applied, error) {
	out := last
	pctx, cancel := context.WithTimeout(ctx, max(s.Poll, 3*time.Second))
	defer cancel()
	b, err := s.Source.Backends(pctx)
	if err != nil {
		return out, err
	}
	out.backends = b
	if s.Nodes != nil && len(b) > 0 {
		st, err := s.Nodes.Poll(pctx, b)
		if err != nil {
			return out, err
		}
		out.zones, out.fp = st.Zones, st.Fingerprint
	}
	return out, nil
}

// start renders, checks and starts dnsdist with state a.
func (s *Supervisor) start(ctx context.Context, a applied) (*exec.Cmd, <-chan error, error) {
	c := s.Template
	c.Backends, c.Zones = a.backends, a.zones
	body, name, err := Render(&c)
	if err != nil {
		return nil, nil, err
	}
	path := filepath.Join(s.Dir, name)
	if err := os.WriteFile(path, body, 0o600); err != nil {
		return nil, nil, fmt.Errorf("write %s: %w", path, err)
	}
	if err := CheckConfig(ctx, s.Bin, path); err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(s.Bin, "-C", path, "--supervised", "--disable-syslog")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("start %s: %w", s.Bin, err)
	}
	pidFile := filepath.Join(s.Dir, PIDFile)
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o600); err != nil {
		s.Log.Warn("edge: writing the pid file", "err", err)
	}
	exited := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			s.Log.Info(sc.Text(), "component", "dnsdist")
		}
		err := cmd.Wait()
		_ = os.Remove(pidFile)
		exited <- err
	}()
	s.mu.Lock()
	s.applied = a
	s.mu.Unlock()
	// The console answering means the configuration is loaded.
	for i := 0; i < 100; i++ {
		if _, err := s.console.Run(ctx, "showVersion()"); err == nil {
			s.running.Store(true)
			break
		}
		select {
		case err := <-exited:
			exited <- err
			return cmd, exited, nil
		case <-time.After(100 * time.Millisecond):
		}
	}
	s.Log.Info("edge: dnsdist started", "pid", cmd.Process.Pid, "config", path, "backends", len(a.backends), "zones", strings.Join(a.zones, " "))
	return cmd, exited, nil
}

// follow polls the sources and applies changes through the console
// until dnsdist exits or ctx ends; it returns the desired state.
func (s *Supervisor) follow(ctx context.Context, exited <-chan error) applied {
	tick := time.NewTicker(s.Poll)
	defer tick.Stop()
	s.mu.Lock()
	desired := s.applied
	s.mu.Unlock()
	var pendingSince time.Time
	for {
		select {
		case <-ctx.Done():
			return desired
		case err := <-exited:
			s.Log.Warn("edge: dnsdist stopped", "err", err)
			return desired
		case <-tick.C:
		}
		next, err := s.observe(ctx, desired)
		if err != nil {
			s.Log.Warn("edge: polling the backends and nodes", "err", err)
		}
		s.mu.Lock()
		cur := s.applied
		s.mu.Unlock()
		if next.fp != cur.fp {
			if cur.fp != "" {
				s.flush(ctx, next.fp)
			}
			s.mu.Lock()
			s.applied.fp = next.fp
			s.mu.Unlock()
		}
		if !sameBackends(next.backends, desired.backends) || !slices.Equal(next.zones, desired.zones) {
			pendingSince = time.Now() // a new change restarts the debounce
		}
		desired = next
		if pendingSince.IsZero() || time.Since(pendingSince) < s.Debounce {
			continue
		}
		pendingSince = time.Time{}
		if err := s.apply(ctx, cur, desired); err != nil {
			// The console failed half way: restart dnsdist on the desired
			// state rather than guess what it has.
			s.Log.Error("edge: applying a change through the console failed; restarting dnsdist", "err", err)
			return desired
		}
	}
}

func backendKey(b Backend) string { return b.Name + "@" + b.Address.String() }

func sameBackends(a, b []Backend) bool {
	return slices.EqualFunc(a, b, func(x, y Backend) bool { return backendKey(x) == backendKey(y) })
}

// apply moves dnsdist from cur to next without a restart: new backends
// first, then zones, then the gone backends are set down, drained for
// --drain and removed.
func (s *Supervisor) apply(ctx context.Context, cur, next applied) error {
	have := map[string]bool{}
	for _, b := range cur.backends {
		have[backendKey(b)] = true
	}
	want := map[string]bool{}
	for _, b := range next.backends {
		want[backendKey(b)] = true
		if have[backendKey(b)] {
			continue
		}
		for _, cmd := range s.Template.ServerCommands(b) {
			if _, err := s.console.Run(ctx, cmd); err != nil {
				return fmt.Errorf("add backend %s: %w", b.Name, err)
			}
		}
		s.Log.Info("edge: backend added", "backend", b.Name, "address", b.Address)
	}
	if !slices.Equal(cur.zones, next.zones) {
		if _, err := s.console.Run(ctx, s.Template.ZonesCommand(next.zones)); err != nil {
			return fmt.Errorf("zones: %w", err)
		}
		s.Log.Info("edge: zones changed", "zones", strings.Join(next.zones, " "))
	}
	var gone []Backend
	for _, b := range cur.backends {
		if !want[backendKey(b)] {
			gone = append(gone, b)
		}
	}
	if len(gone) > 0 {
		if _, err := s.console.Run(ctx, serversLua(s.Template, gone, "s:setDown()")); err != nil {
			return fmt.Errorf("drain backends: %w", err)
		}
		select {
		case <-time.After(s.Drain):
		case <-ctx.Done():
		}
		if _, err := s.console.Run(ctx, serversLua(s.Template, gone, "rmServer(s)")); err != nil {
			return fmt.Errorf("remove backends: %w", err)
		}
		for _, b := range gone {
			s.Log.Info("edge: backend removed", "backend", b.Name, "address", b.Address)
		}
	}
	s.mu.Lock()
	s.applied.backends, s.applied.zones = next.backends, next.zones
	s.mu.Unlock()
	return nil
}

// serversLua runs stmt for each dnsdist server s of the backends.
func serversLua(c Config, bs []Backend, stmt string) string {
	var names []string
	for _, b := range bs {
		names = append(names, c.ServerNames(b)...)
	}
	var cond []string
	for _, n := range names {
		cond = append(cond, "n == "+luaQuote(n))
	}
	return "for _, s in ipairs(getServers()) do local n = s:getName() if " + strings.Join(cond, " or ") + " then " + stmt + " end end"
}

// flush empties the packet cache: a node's policy snapshot or blocking
// toggle changed.
func (s *Supervisor) flush(ctx context.Context, fp string) {
	if !s.Template.authCached() {
		return
	}
	if _, err := s.console.Run(ctx, `getPool("`+PoolAuthoritative+`"):getCache():expunge(0)`); err != nil {
		s.Log.Warn("edge: flushing the cache", "err", err)
		return
	}
	s.Log.Info("edge: cache flushed", "reason", "node state changed", "state", fp)
}

// shutdown drains (not ready for --drain, so whatever balances in front
// of the edge moves away), then stops dnsdist within --stop-timeout.
func (s *Supervisor) shutdown(cmd *exec.Cmd, exited <-chan error) {
	s.stopped.Store(true)
	s.Log.Info("edge: stopping", "drain", s.Drain)
	time.Sleep(s.Drain)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(s.Stop):
		s.Log.Warn("edge: dnsdist did not stop in time; killing it", "stop-timeout", s.Stop)
		_ = cmd.Process.Kill()
		<-exited
	}
	s.Log.Info("edge: stopped")
}

// Readiness is what /healthz/ready reports.
type Readiness struct {
	Ready      bool   `json:"ready"`
	BackendsUp int    `json:"backendsUp"`
	Required   int    `json:"requiredBackends"`
	Reason     string `json:"reason,omitempty"`
}

func (s *Supervisor) readiness(ctx context.Context) Readiness {
	r := Readiness{Required: s.RequireBackends}
	switch {
	case s.stopped.Load():
		r.Reason = "stopping"
		return r
	case !s.running.Load():
		r.Reason = "dnsdist is not running"
		return r
	}
	up, err := BackendsUp(ctx, s.Template.API, s.Template.APIKey)
	if err != nil {
		r.Reason = err.Error()
		return r
	}
	r.BackendsUp = up
	if up < s.RequireBackends {
		r.Reason = fmt.Sprintf("%d backends up, %d required", up, s.RequireBackends)
		return r
	}
	if _, err := probe.Query(ctx, s.Template.localDNS(), HealthName, "TXT", time.Second); err != nil {
		r.Reason = "dnsdist does not answer: " + err.Error()
		return r
	}
	r.Ready = true
	return r
}

// localDNS is the Do53 listener as this host reaches it.
func (c *Config) localDNS() string {
	ap, err := netip.ParseAddrPort(c.bindAddr("do53"))
	if err != nil {
		return c.bindAddr("do53")
	}
	a := ap.Addr()
	if a.IsUnspecified() {
		a = netip.MustParseAddr("127.0.0.1")
		if ap.Addr().Is6() {
			a = netip.IPv6Loopback()
		}
	}
	return netip.AddrPortFrom(a, ap.Port()).String()
}

func (s *Supervisor) serveHealth(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.HealthAddress)
	if err != nil {
		return fmt.Errorf("--health-address %s: %w", s.HealthAddress, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz/live", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /healthz/ready", func(w http.ResponseWriter, r *http.Request) {
		rctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		rd := s.readiness(rctx)
		w.Header().Set("Content-Type", "application/json")
		if !rd.Ready {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(rd)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	s.Log.Info("edge: health listening", "address", ln.Addr().String())
	return nil
}

// BackendsUp asks dnsdist's API how many backends (nodes, not server
// entries: a node has two when the authoritative pool is cached) are up.
func BackendsUp(ctx context.Context, api, key string) (int, error) {
	url := api
	if !strings.Contains(url, "://") {
		url = "http://" + url
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(url, "/")+"/api/v1/servers/localhost", nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("X-API-Key", key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("dnsdist API %s: %w", api, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("dnsdist API %s: HTTP %d (wrong API key?)", api, res.StatusCode)
	}
	var body struct {
		Servers []struct {
			Name  string `json:"name"`
			State string `json:"state"`
		} `json:"servers"`
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, 8<<20)).Decode(&body); err != nil {
		return 0, fmt.Errorf("dnsdist API %s: %w", api, err)
	}
	up := map[string]bool{}
	for _, sv := range body.Servers {
		name, _, _ := strings.Cut(sv.Name, "#")
		if strings.EqualFold(sv.State, "up") {
			if _, seen := up[name]; !seen {
				up[name] = true
			}
		} else {
			up[name] = false // a node counts as up only when all its entries are
		}
	}
	n := 0
	for _, ok := range up {
		if ok {
			n++
		}
	}
	return n, nil
}
