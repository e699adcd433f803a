package vip

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/svcdns/svc/internal/atomicfile"
)

// ProbeInterval is how often svc vip run asks the local DNS (Track file).
const ProbeInterval = 500 * time.Millisecond

// probeRise is how many probes in a row must pass before a failed node
// takes VIPs again (one failure is enough to give them away).
const probeRise = 2

// Check runs keepalived's configuration test on path; keepalived is the
// command (with any prefix such as `ip netns exec NS`), default keepalived.
func Check(ctx context.Context, keepalived []string, path string) error {
	if len(keepalived) == 0 {
		keepalived = []string{"keepalived"}
	}
	args := append(append([]string{}, keepalived[1:]...), "--config-test", "-f", path)
	cmd := exec.CommandContext(ctx, keepalived[0], args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return fmt.Errorf("keepalived --config-test %s failed (exit %d): %s", path, ee.ExitCode(), strings.TrimSpace(string(out)))
		}
		return fmt.Errorf("keepalived --config-test %s: %w (install keepalived, Debian package keepalived)", path, err)
	}
	return nil
}

// Supervisor is svc vip run: it renders and checks the configuration,
// runs keepalived in the foreground, reloads it when the peers change,
// restarts it with backoff and serves health and metrics.
type Supervisor struct {
	Options                 // Peers and Self are filled from PeerSource on every render
	PeerSource   PeerSource // the peers (static or from Kubernetes)
	FixedSelf    bool       // Options.Self was given; do not detect it
	Keepalived   string     // keepalived binary (default keepalived)
	StopTimeout  time.Duration
	PeerInterval time.Duration // how often peers are read again (default 2s)
	// HealthAddress serves /healthz, /status and /metrics ("" none).
	HealthAddress string
	Log           *slog.Logger
	// Listening, if set, gets the health listener's address once bound.
	Listening func(addr string)

	restarts atomic.Int64
	reloads  atomic.Int64
	running  atomic.Bool
	mu       sync.Mutex
	lastErr  string
}

func (s *Supervisor) configPath() string { return filepath.Join(s.RunDir, ConfigFile) }

// render renders with the current peers and returns the config and plan.
func (s *Supervisor) render(ctx context.Context) ([]byte, Plan, error) {
	peers, err := s.PeerSource(ctx)
	if err != nil {
		return nil, Plan{}, fmt.Errorf("peers: %w", err)
	}
	o := s.Options
	o.Peers = peers
	if !s.FixedSelf {
		if o.Self, err = DetectSelf(peers, o.VIPs); err != nil {
			return nil, Plan{}, err
		}
	}
	return Render(o, nil)
}

// install writes a rendering to the run dir and checks it with keepalived.
func (s *Supervisor) install(ctx context.Context, conf []byte, plan Plan) error {
	// A candidate first: a config keepalived refuses never replaces the one
	// it runs with.
	cand := s.configPath() + ".new"
	if err := atomicfile.Write(cand, conf, 0o600); err != nil {
		return err
	}
	if err := Check(ctx, []string{s.keepalived()}, cand); err != nil {
		return err
	}
	if err := os.Rename(cand, s.configPath()); err != nil {
		return err
	}
	return writeJSON(filepath.Join(s.RunDir, PlanFile), plan, 0o644)
}

func (s *Supervisor) keepalived() string {
	if s.Keepalived == "" {
		return "keepalived"
	}
	return s.Keepalived
}

// Run supervises keepalived until ctx ends, then stops it gracefully.
func (s *Supervisor) Run(ctx context.Context) error {
	if s.Log == nil {
		s.Log = slog.Default()
	}
	if s.PeerInterval <= 0 {
		s.PeerInterval = 2 * time.Second
	}
	if err := os.MkdirAll(s.RunDir, 0o755); err != nil {
		return fmt.Errorf("--run-dir: %w", err)
	}
	if s.Track == TrackFile {
		// Unhealthy until the first probes pass: a node that starts must
		// not take a VIP before its DNS answers.
		if err := atomicfile.Write(filepath.Join(s.RunDir, HealthFile), []byte("1\n"), 0o644); err != nil {
			return fmt.Errorf("--run-dir: %w", err)
		}
	}
	conf, plan, err := s.render(ctx)
	if err != nil {
		return err
	}
	if err := s.install(ctx, conf, plan); err != nil {
		return err
	}
	s.Log.Info("vip: keepalived config rendered and checked", "path", s.configPath(), "self", plan.Self,
		"peers", strings.Join(plan.Peers, ","), "priorityIndex", plan.PriorityIndex, "auth", plan.Auth)
	if s.HealthAddress != "" {
		ln, err := net.Listen("tcp", s.HealthAddress)
		if err != nil {
			return fmt.Errorf("--health-address %s: %w", s.HealthAddress, err)
		}
		srv := &http.Server{Handler: s.handler(), ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
		s.Log.Info("vip: health listening", "address", ln.Addr().String())
		if s.Listening != nil {
			s.Listening(ln.Addr().String())
		}
	}
	pctx, pcancel := context.WithCancel(ctx)
	defer pcancel()
	go s.watchStates(pctx)
	if s.Track == TrackFile {
		go s.probeLoop(pctx)
	}
	backoff := time.Second
	for {
		started := time.Now()
		cmd, exited, err := s.start()
		if err != nil {
			s.setErr(err)
			s.Log.Error("vip: starting keepalived", "err", err)
		} else {
			stop := s.watch(ctx, cmd, exited, conf)
			if stop {
				return s.stop(cmd, exited)
			}
		}
		s.running.Store(false)
		if time.Since(started) > time.Minute {
			backoff = time.Second
		}
		s.restarts.Add(1)
		s.Log.Warn("vip: keepalived exited, restarting", "in", backoff.String())
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 30*time.Second)
		// Start from what is current, not what was last installed.
		if c, p, err := s.render(ctx); err == nil {
			if err := s.install(ctx, c, p); err == nil {
				conf = c
			} else {
				s.Log.Error("vip: new rendering refused, keeping the last good one", "err", err)
			}
		}
	}
}

// start runs keepalived in the foreground with its pid files in the run dir.
func (s *Supervisor) start() (*exec.Cmd, chan error, error) {
	// States of an earlier keepalived are stale: every instance starts as
	// BACKUP and the fifo reports from there.
	_ = os.Remove(filepath.Join(s.RunDir, StateFile))
	cmd := exec.Command(s.keepalived(), "--dont-fork", "--log-console", "--log-detail", "--no-syslog", "--vrrp",
		"-f", s.configPath(), "--pid", filepath.Join(s.RunDir, PIDFile), "--vrrp_pid", filepath.Join(s.RunDir, VRRPPID))
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	cmd.Stderr = cmd.Stdout
	// keepalived must not outlive its supervisor: a track file nobody
	// writes any more would keep the VIPs on a node whose DNS is dead.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("keepalived: %w (install keepalived, Debian package keepalived)", err)
	}
	s.running.Store(true)
	s.setErr(nil)
	s.Log.Info("vip: keepalived started", "pid", cmd.Process.Pid)
	exited := make(chan error, 1)
	go func() {
		s.pipeLog(out)
		exited <- cmd.Wait()
	}()
	return cmd, exited, nil
}

// pipeLog logs keepalived's console output line by line.
func (s *Supervisor) pipeLog(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		s.Log.Info("keepalived", "line", sc.Text())
	}
}

// watch waits for ctx (true: stop) or keepalived's exit (false: restart),
// and reloads keepalived when a new rendering differs.
func (s *Supervisor) watch(ctx context.Context, cmd *exec.Cmd, exited chan error, conf []byte) bool {
	t := time.NewTicker(s.PeerInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return true
		case err := <-exited:
			s.setErr(fmt.Errorf("keepalived exited: %v", err))
			exited <- err // stop() and Run read it again
			return false
		case <-t.C:
			c, p, err := s.render(ctx)
			if err != nil {
				s.setErr(err)
				s.Log.Error("vip: rendering with the current peers", "err", err)
				continue
			}
			if bytes.Equal(c, conf) {
				continue
			}
			if err := s.install(ctx, c, p); err != nil {
				s.setErr(err)
				s.Log.Error("vip: new rendering refused, keeping the running one", "err", err)
				continue
			}
			conf = c
			s.reloads.Add(1)
			s.Log.Info("vip: peers changed, reloading keepalived", "peers", strings.Join(p.Peers, ","), "priorityIndex", p.PriorityIndex)
			_ = cmd.Process.Signal(syscall.SIGHUP)
		}
	}
}

// stop sends SIGTERM (keepalived then sends priority 0 adverts so that a
// backup takes over at once) and kills it after StopTimeout.
func (s *Supervisor) stop(cmd *exec.Cmd, exited chan error) error {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	timeout := s.StopTimeout
	if timeout <= 0 {
		timeout = 15 * time.Second
	}
	select {
	case <-exited:
		s.Log.Info("vip: keepalived stopped")
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-exited
		s.Log.Warn("vip: keepalived did not stop within --stop-timeout, killed", "timeout", timeout.String())
	}
	s.running.Store(false)
	_ = os.Remove(filepath.Join(s.RunDir, PIDFile))
	return nil
}

func (s *Supervisor) setErr(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		s.lastErr = ""
	} else {
		s.lastErr = err.Error()
	}
}

// probeLoop asks the local DNS every ProbeInterval and writes HealthFile
// when the verdict changes: 1 at the first failure, 0 after probeRise
// successes in a row.
func (s *Supervisor) probeLoop(ctx context.Context) {
	path := filepath.Join(s.RunDir, HealthFile)
	healthy, ok := false, 0
	t := time.NewTicker(ProbeInterval)
	defer t.Stop()
	for {
		err := RunProbe(ctx, s.Probe, s.RunDir)
		if ctx.Err() != nil {
			return
		}
		switch {
		case err != nil && healthy:
			healthy, ok = false, 0
			s.Log.Warn("vip: local DNS fails the probe, giving the VIPs away", "err", err)
			if werr := atomicfile.Write(path, []byte("1\n"), 0o644); werr != nil {
				s.Log.Error("vip: writing the health file", "err", werr)
			}
		case err != nil:
			ok = 0
		case !healthy:
			if ok++; ok >= probeRise {
				healthy = true
				s.Log.Info("vip: local DNS answers the probe, VIPs may come here")
				if werr := atomicfile.Write(path, []byte("0\n"), 0o644); werr != nil {
					s.Log.Error("vip: writing the health file", "err", werr)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// watchStates logs the instance states svc vip fifo writes (keepalived
// runs the fifo reader with its output discarded).
func (s *Supervisor) watchStates(ctx context.Context) {
	seen := map[string]string{}
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		if st, err := ReadState(s.RunDir); err == nil {
			for name, in := range st.Instances {
				if seen[name] != in.State {
					s.Log.Info("vip: state", "instance", name, "state", in.State, "previous", orUnknown(seen[name]), "priority", in.Priority)
					seen[name] = in.State
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
