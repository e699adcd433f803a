// Package doctor holds the checks of `svc doctor` and of the API's doctor
// route, and the DoctorReport shape both print: each check names what it
// looked at, and a failure says why and what to do.
package doctor

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/svcdns/svc/internal/settings"
)

// Statuses of a check.
const (
	OK   = "ok"
	Warn = "warn"
	Fail = "fail"
)

// Check is one DoctorCheck.
type Check struct {
	Check   string `json:"check"`
	Status  string `json:"status" enum:"ok,warn,fail"`
	Message string `json:"message"`
}

// Report is the DoctorReport shape.
type Report struct {
	Node     string  `json:"node"`
	Version  string  `json:"version"`
	Checks   []Check `json:"checks"`
	Failures int     `json:"failures"`
	Warnings int     `json:"warnings"`
	TookMS   float64 `json:"took_ms"`
}

// Add records a check.
func (r *Report) Add(check, status, format string, args ...any) {
	r.Checks = append(r.Checks, Check{Check: check, Status: status, Message: fmt.Sprintf(format, args...)})
}

// Finish counts failures and warnings and sets took_ms from start.
func (r *Report) Finish(start time.Time) {
	r.Failures, r.Warnings = 0, 0
	for _, c := range r.Checks {
		switch c.Status {
		case Fail:
			r.Failures++
		case Warn:
			r.Warnings++
		}
	}
	r.TookMS = float64(time.Since(start).Microseconds()) / 1000
}

// DataDir checks node.dataDir: a directory the node can create files in,
// or one it can create at start.
func DataDir(r *Report, dir string) {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		parent := existingParent(dir)
		if err := probeWrite(parent); err != nil {
			r.Add("dataDir", Fail, "node.dataDir %s does not exist and cannot be created: %s is not writable (%v); create it for the service's user", dir, parent, err)
			return
		}
		r.Add("dataDir", Warn, "node.dataDir %s does not exist yet (created at start)", dir)
		return
	case err != nil:
		r.Add("dataDir", Fail, "node.dataDir %s: %v", dir, err)
		return
	case !st.IsDir():
		r.Add("dataDir", Fail, "node.dataDir %s is not a directory: point node.dataDir at a directory", dir)
		return
	}
	if err := probeWrite(dir); err != nil {
		r.Add("dataDir", Fail, "node.dataDir %s is not writable (%v): give the service's user write access", dir, err)
		return
	}
	r.Add("dataDir", OK, "node.dataDir %s writable", filepath.Clean(dir))
}

func existingParent(dir string) string {
	for p := filepath.Dir(filepath.Clean(dir)); ; p = filepath.Dir(p) {
		if _, err := os.Stat(p); err == nil || p == filepath.Dir(p) {
			return p
		}
	}
}

// probeWrite creates and removes a file in dir.
func probeWrite(dir string) error {
	f, err := os.CreateTemp(dir, ".doctor-*")
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return pe.Err
		}
		return err
	}
	f.Close()
	return os.Remove(f.Name())
}

// Listener is one address a node binds.
type Listener struct {
	Name    string // setting, e.g. listeners.api.address
	Network string // tcp or udp
	Address string
}

// Listeners are the addresses cfg binds, in settings order.
func Listeners(cfg *settings.Config) []Listener {
	var out []Listener
	add := func(name, network, addr string) {
		if addr != "" {
			out = append(out, Listener{name, network, addr})
		}
	}
	for _, l := range cfg.Listeners.DNS {
		for _, p := range l.Protocols {
			add("listeners.dns", p, l.Address)
		}
	}
	for _, l := range cfg.Listeners.DoT {
		add("listeners.dot", "tcp", l.Address)
	}
	for _, l := range cfg.Listeners.DoH {
		add("listeners.doh", "tcp", l.Address)
	}
	for _, l := range cfg.Listeners.DoQ {
		add("listeners.doq", "udp", l.Address)
	}
	for _, l := range cfg.Listeners.DoH3 {
		add("listeners.doh3", "udp", l.Address)
	}
	add("listeners.api.address", "tcp", cfg.Listeners.API.Address)
	add("listeners.ops.address", "tcp", cfg.Listeners.Ops.Address)
	add("listeners.metrics.address", "tcp", cfg.Listeners.Metrics.Address)
	add("listeners.internal.address", "tcp", cfg.Listeners.Internal.Address)
	if cfg.BlockPage.Enabled {
		add("listeners.blockPage.http", "tcp", cfg.Listeners.BlockPage.HTTP)
		add("listeners.blockPage.https", "tcp", cfg.Listeners.BlockPage.HTTPS)
	}
	return out
}

// Ports binds each listener address for a moment. An address in use is a
// failure naming it, unless held is true for it (the running node holds it,
// as its own doctor report says).
func Ports(r *Report, ls []Listener, held func(Listener) bool) {
	var busy []string
	free, byNode := 0, 0
	for _, l := range ls {
		err := tryBind(l)
		switch {
		case err == nil:
			free++
		case held != nil && held(l):
			byNode++
		case errors.Is(err, syscall.EADDRINUSE):
			busy = append(busy, fmt.Sprintf("%s %s/%s is in use by another process", l.Name, l.Network, l.Address))
		case errors.Is(err, syscall.EACCES):
			busy = append(busy, fmt.Sprintf("%s %s/%s: permission denied (ports below 1024 need root or CAP_NET_BIND_SERVICE)", l.Name, l.Network, l.Address))
		case errors.Is(err, syscall.EADDRNOTAVAIL):
			busy = append(busy, fmt.Sprintf("%s %s/%s: no such address on this host", l.Name, l.Network, l.Address))
		default:
			busy = append(busy, fmt.Sprintf("%s %s/%s: %v", l.Name, l.Network, l.Address, err))
		}
	}
	if len(busy) > 0 {
		r.Add("ports", Fail, "%s; free them or change the setting (--skip-ports skips this check)", strings.Join(busy, "; "))
		return
	}
	msg := fmt.Sprintf("%d listener addresses free", free)
	if byNode > 0 {
		msg += fmt.Sprintf(", %d held by the running node", byNode)
	}
	r.Add("ports", OK, "%s", msg)
}

func tryBind(l Listener) error {
	if l.Network == "udp" {
		c, err := net.ListenPacket("udp", l.Address)
		if err != nil {
			return err
		}
		return c.Close()
	}
	ln, err := net.Listen("tcp", l.Address)
	if err != nil {
		return err
	}
	return ln.Close()
}

// Bound is the check of a running node's listeners: every address it
// bound, as network/address, so a local `svc doctor` can tell the node's
// own ports from another process's (HeldBy).
func Bound(r *Report, addrs []string) {
	r.Add("listeners", OK, "bound: %s", strings.Join(addrs, " "))
}

// HeldBy reports whether the listener's address is among those a node's
// report lists as bound (port 0 and wildcard hosts compared as written).
func HeldBy(rep *Report) func(Listener) bool {
	var bound []string
	for _, c := range rep.Checks {
		if c.Check == "listeners" {
			bound = strings.Fields(strings.TrimPrefix(c.Message, "bound: "))
		}
	}
	return func(l Listener) bool {
		_, port, err := net.SplitHostPort(l.Address)
		if err != nil || port == "0" {
			return false
		}
		return slices.ContainsFunc(bound, func(b string) bool {
			_, addr, _ := strings.Cut(b, "/")
			_, bport, _ := net.SplitHostPort(addr)
			return bport == port && (strings.HasPrefix(b, l.Network+"/") || !strings.Contains(b, "/"))
		})
	}
}
