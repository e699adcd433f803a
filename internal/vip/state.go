package vip

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/svcdns/svc/internal/atomicfile"
)

// InstanceState is one VRRP instance's last known state (from the fifo).
type InstanceState struct {
	State    string    `json:"state"` // MASTER, BACKUP, FAULT, STOP
	Priority int       `json:"priority"`
	Since    time.Time `json:"since"`
}

// State is StateFile: written by svc vip fifo on every notify.
type State struct {
	Instances   map[string]InstanceState `json:"instances"`
	Transitions int                      `json:"transitions"`
	Updated     time.Time                `json:"updated"`
}

// writeJSON writes v to path atomically (a reader never sees half a file).
func writeJSON(path string, v any, mode os.FileMode) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(path, append(b, '\n'), mode)
}

// ReadPlan reads the plan svc vip run wrote into runDir.
func ReadPlan(runDir string) (Plan, error) {
	var p Plan
	b, err := os.ReadFile(filepath.Join(runDir, PlanFile))
	if err != nil {
		return p, fmt.Errorf("no VIP plan in %s (is svc vip run running with --run-dir %s?): %w", runDir, runDir, err)
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("%s: %w", filepath.Join(runDir, PlanFile), err)
	}
	return p, nil
}

// ReadState reads the instance states svc vip fifo wrote into runDir; no
// file yet is an empty state.
func ReadState(runDir string) (State, error) {
	s := State{Instances: map[string]InstanceState{}}
	b, err := os.ReadFile(filepath.Join(runDir, StateFile))
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("%s: %w", filepath.Join(runDir, StateFile), err)
	}
	if s.Instances == nil {
		s.Instances = map[string]InstanceState{}
	}
	return s, nil
}

// KeepalivedPID is the running keepalived's pid from runDir, or an error
// saying why there is none.
func KeepalivedPID(runDir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(runDir, PIDFile))
	if err != nil {
		return 0, fmt.Errorf("keepalived is not running under svc vip run: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("%s: not a pid", filepath.Join(runDir, PIDFile))
	}
	if err := syscall.Kill(pid, 0); err != nil {
		return 0, fmt.Errorf("keepalived pid %d from %s is not running: %w", pid, filepath.Join(runDir, PIDFile), err)
	}
	return pid, nil
}

// readDrain is the drain file's value (0 when missing).
func readDrain(runDir string) int {
	b, err := os.ReadFile(filepath.Join(runDir, DrainFile))
	if err != nil {
		return drainServing
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return drainServing
	}
	return v
}

// Drained says whether svc vip drain is in effect in runDir.
func Drained(runDir string) bool { return readDrain(runDir) != drainServing }

func writeDrain(runDir string, v int) error {
	// keepalived watches the file with inotify; a rename is a change it sees.
	return atomicfile.Write(filepath.Join(runDir, DrainFile), []byte(strconv.Itoa(v)+"\n"), 0o644)
}

// waitStates polls the state file until ok holds (nil) or ctx ends.
func waitStates(ctx context.Context, runDir string, ok func(Plan, State) (bool, string)) error {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	last := ""
	for {
		plan, err := ReadPlan(runDir)
		if err != nil {
			return err
		}
		st, err := ReadState(runDir)
		if err != nil {
			return err
		}
		done, why := ok(plan, st)
		if done {
			return nil
		}
		last = why
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", last, ctx.Err())
		case <-t.C:
		}
	}
}

// Drain moves this node's VIPs away: FAULT first, so that each master
// sends a priority 0 advert and a backup takes over at once, then, once no
// instance here is MASTER, a priority below every serving node so that the
// node stays a backup of last resort. It returns when the VIPs are gone or
// ctx ends.
func Drain(ctx context.Context, runDir string) error {
	if _, err := ReadPlan(runDir); err != nil {
		return err
	}
	if err := writeDrain(runDir, drainFault); err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	err := waitStates(ctx, runDir, func(p Plan, s State) (bool, string) {
		for _, in := range p.Instances {
			if st := s.Instances[in.Name]; st.State == "MASTER" || st.State == "" {
				return false, fmt.Sprintf("%s (%s) is still %s here", in.Name, in.Address, orUnknown(st.State))
			}
		}
		return true, ""
	})
	if err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	if err := writeDrain(runDir, drainBackup); err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	return nil
}

// Rebalance ends a drain and waits until this node holds every VIP it is
// the first choice for (the others' preempt_delay applies), or ctx ends.
func Rebalance(ctx context.Context, runDir string) error {
	if _, err := ReadPlan(runDir); err != nil {
		return err
	}
	if err := writeDrain(runDir, drainServing); err != nil {
		return fmt.Errorf("rebalance: %w", err)
	}
	err := waitStates(ctx, runDir, func(p Plan, s State) (bool, string) {
		for _, in := range p.Instances {
			if st := s.Instances[in.Name]; in.Preferred && st.State != "MASTER" {
				return false, fmt.Sprintf("%s (%s) prefers this node but is %s here", in.Name, in.Address, orUnknown(st.State))
			}
		}
		return true, ""
	})
	if err != nil {
		return fmt.Errorf("rebalance: %w", err)
	}
	return nil
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown (no notify yet)"
	}
	return s
}

// Notify is one line keepalived wrote to the notify fifo.
type Notify struct {
	Instance string
	State    string // MASTER, BACKUP, FAULT, STOP, DELETED, or another event word
	Priority int
}

// ParseNotify parses `INSTANCE "name" STATE PRIORITY`; other lines (GROUP)
// return ok false.
func ParseNotify(line string) (Notify, bool) {
	f := strings.Fields(line)
	if len(f) < 3 || f[0] != "INSTANCE" {
		return Notify{}, false
	}
	n := Notify{Instance: strings.Trim(f[1], `"`), State: f[2]}
	if len(f) > 3 {
		n.Priority, _ = strconv.Atoi(f[3])
	}
	return n, true
}

// states keepalived reports as an instance's state (the rest are events
// such as MASTER_RX_LOWER_PRI or priority changes).
var states = map[string]bool{"MASTER": true, "BACKUP": true, "FAULT": true, "STOP": true, "DELETED": true}

// Recorder is what ReadFifo tells about each notify (log, metrics,
// Kubernetes Events); nil fields are skipped.
type Recorder func(n Notify, prev InstanceState)

// ReadFifo reads keepalived's notify lines from r until EOF or ctx ends,
// keeping StateFile in runDir current and calling rec for each state change.
func ReadFifo(ctx context.Context, log *slog.Logger, runDir string, r io.Reader, rec Recorder) error {
	st, err := ReadState(runDir)
	if err != nil {
		log.Warn("vip fifo: state file unreadable, starting afresh", "err", err)
		st = State{Instances: map[string]InstanceState{}}
	}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if ctx.Err() != nil {
			return nil
		}
		n, ok := ParseNotify(sc.Text())
		if !ok {
			log.Debug("vip fifo: line ignored", "line", sc.Text())
			continue
		}
		prev := st.Instances[n.Instance]
		cur := prev
		if states[n.State] {
			if cur.State != n.State {
				cur.Since = time.Now().UTC()
				st.Transitions++
			}
			cur.State = n.State
		}
		if n.Priority > 0 {
			cur.Priority = n.Priority
		}
		st.Instances[n.Instance] = cur
		st.Updated = time.Now().UTC()
		if err := writeJSON(filepath.Join(runDir, StateFile), st, 0o644); err != nil {
			log.Error("vip fifo: writing state", "err", err)
		}
		log.Info("vrrp notify", "instance", n.Instance, "event", n.State, "priority", n.Priority, "previous", prev.State)
		if rec != nil {
			rec(n, prev)
		}
	}
	return sc.Err()
}

// ServeFifo creates the notify fifo at path if needed and reads it until
// ctx ends. It holds the fifo open for writing too, so a keepalived restart
// (writer gone) is no end of input. keepalived signals the script before
// its last notifies (the STOP states), so reading goes on for a second
// after ctx ends.
func ServeFifo(ctx context.Context, log *slog.Logger, runDir, path string, rec Recorder) error {
	if err := syscall.Mkfifo(path, 0o600); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("notify fifo %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("notify fifo %s: %w", path, err)
	}
	defer f.Close()
	stop := context.AfterFunc(ctx, func() { _ = f.SetReadDeadline(time.Now().Add(time.Second)) })
	defer stop()
	err = ReadFifo(context.Background(), log, runDir, f, rec)
	if ctx.Err() != nil {
		return nil
	}
	return err
}
