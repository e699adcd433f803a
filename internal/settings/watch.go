package settings

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"time"

	"github.com/fsnotify/fsnotify"
)

// reloadDelay gathers the burst of events one write makes into one reload.
const reloadDelay = 100 * time.Millisecond

// Watch follows the settings file until ctx ends and reloads it on change.
// An invalid file is logged and the last good configuration stays. It returns
// at once when no settingsFile is configured. Run it in its own goroutine.
func (m *Manager) Watch(ctx context.Context) error {
	if m.settingsPath == "" {
		return nil
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching settings file: %w", err)
	}
	defer w.Close()
	// Watch the directory: an atomic replace (rename) swaps the file's inode,
	// which a watch on the file itself would lose.
	dir := filepath.Dir(m.settingsPath)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("watching settings file: %w", err)
	}
	if err := w.Add(dir); err != nil {
		return fmt.Errorf("watching settings file: %w", err)
	}
	// Catch a change made between Load and now.
	m.Reload(ctx)
	base := filepath.Base(m.settingsPath)
	timer := time.NewTimer(reloadDelay)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if filepath.Base(ev.Name) == base {
				timer.Reset(reloadDelay)
			}
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			m.log.Warn("settings file watch error", "path", m.settingsPath, "err", err)
		case <-timer.C:
			m.Reload(ctx)
		}
	}
}

// Reload re-reads the settings file. On error it logs, keeps the last good
// configuration and returns the error; an unchanged file publishes nothing.
func (m *Manager) Reload(ctx context.Context) error {
	if m.settingsPath == "" || ctx.Err() != nil {
		return ctx.Err()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	l, err := m.readSettingsFile()
	if err == nil {
		var st *state
		if st, err = m.build(m.compose(l)); err == nil {
			if reflect.DeepEqual(m.formatLayer(l), m.formatLayer(m.settings)) {
				return nil
			}
			m.settings = l
			m.cur.Store(st)
			m.publish(st.cfg)
			m.log.Info("settings file reloaded", "path", m.settingsPath, "restartPending", m.RestartPending())
			return nil
		}
	}
	m.log.Error("settings file refused, keeping the last good settings", "path", m.settingsPath, "err", err)
	return err
}

func (m *Manager) formatLayer(l layer) map[string]any {
	out := make(map[string]any, len(l.vals))
	for p, v := range l.vals {
		out[p] = m.byPath[p].format(v)
	}
	return out
}
