package settings

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"sigs.k8s.io/yaml"
)

// Shared keeps the cluster-scope settings where every node of a cluster
// reads them (Kubernetes: a ConfigMap every node watches). With a Shared
// store, PATCH /settings changes it instead of the settings file, and each
// node applies what it holds through ReplaceCluster.
type Shared interface {
	// Update reads the stored cluster settings (YAML of nested keys; empty
	// when none are stored yet), hands them to change and stores what change
	// returns unless the store changed in between (then it reads again).
	// An error of change is returned as it is.
	Update(ctx context.Context, change func(cur []byte) ([]byte, error)) error
}

// UseShared makes PATCH /settings write cluster-scope keys to s. Call it
// before the node serves the API; the cluster keys of the settings file
// are ignored from then on, the store's replace them (ReplaceCluster).
func (m *Manager) UseShared(s Shared) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.shared = s
	m.useShared = true
}

// OnClusterChange registers f, called with the cluster-scope keys (YAML of
// nested keys) after each PATCH /settings this node applied; the
// multi-node SQLite mode pushes them to the peers from there. f runs on the
// request's context and its error is returned to the caller (the change
// itself stays applied here).
func (m *Manager) OnClusterChange(f func(ctx context.Context, cluster []byte) error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.onCluster = f
}

// ClusterYAML is the cluster-scope part of the settings layer (keys set
// through PATCH /settings or a peer), as the YAML ReplaceCluster takes.
func (m *Manager) ClusterYAML() ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.encodeScope(m.composed(), ScopeCluster)
}

// ReplaceCluster makes data (YAML of nested cluster-scope keys, as
// ClusterYAML or the Shared store hold it) this node's cluster settings:
// with a Shared store in memory, otherwise in the settings file (so they
// survive a restart). An invalid document changes nothing and is returned.
func (m *Manager) ReplaceCluster(ctx context.Context, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l, err := m.decodeCluster(data, "cluster settings")
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.useShared && m.settingsPath == "" {
		return ErrReadOnly
	}
	before := m.formatLayer(m.composed())
	file, prevShared := m.settings, m.sharedVals
	if m.useShared {
		m.sharedVals = l
	} else {
		file = withScope(m.settings, l, ScopeCluster, m.byPath)
	}
	next := m.compose(file)
	st, err := m.build(next)
	if err != nil {
		m.sharedVals = prevShared
		return err
	}
	if reflect.DeepEqual(before, m.formatLayer(next)) {
		return nil
	}
	if !m.useShared {
		if err := m.writeSettings(file); err != nil {
			return err
		}
		m.settings = file
	}
	m.cur.Store(st)
	m.publish(st.cfg)
	m.log.Info("cluster settings applied", "restartPending", m.RestartPending())
	return nil
}

// decodeCluster reads a cluster settings document: cluster-scope keys only.
func (m *Manager) decodeCluster(data []byte, source string) (layer, error) {
	l, err := m.decodeFile(data, source)
	if err != nil {
		return layer{}, err
	}
	for p := range l.vals {
		if k := m.byPath[p]; k.info.Scope != ScopeCluster || k.is(FlagHostOnly) {
			return layer{}, &KeyError{Key: p, Source: source, Err: fmt.Errorf("%w: only cluster-scope keys are shared", ErrWrongScope)}
		}
	}
	return l, nil
}

// compose is the settings layer in force: the settings file, whose
// cluster-scope keys a Shared store replaces when one is used.
func (m *Manager) compose(file layer) layer {
	if !m.useShared {
		return file
	}
	return withScope(file, m.sharedVals, ScopeCluster, m.byPath)
}

func (m *Manager) composed() layer { return m.compose(m.settings) }

// withScope is base with its keys of scope replaced by those of repl.
func withScope(base, repl layer, scope Scope, byPath map[string]*key) layer {
	out := newLayer()
	for p, v := range base.vals {
		if byPath[p].info.Scope != scope {
			out.vals[p], out.origin[p] = v, base.origin[p]
		}
	}
	for p, v := range repl.vals {
		out.vals[p], out.origin[p] = v, repl.origin[p]
	}
	return out
}

// encodeScope is the YAML of l's keys of one scope.
func (m *Manager) encodeScope(l layer, scope Scope) ([]byte, error) {
	flat := map[string]any{}
	for p, v := range l.vals {
		if m.byPath[p].info.Scope == scope {
			flat[p] = m.byPath[p].format(v)
		}
	}
	if len(flat) == 0 {
		return []byte("{}\n"), nil
	}
	b, err := yaml.Marshal(nest(flat))
	if err != nil {
		return nil, fmt.Errorf("encoding cluster settings: %w", err)
	}
	return b, nil
}

// patchShared is PATCH /settings with a Shared store: the store's document
// is patched (read, changed, written back unless someone wrote in between)
// and this node applies the result at once; the others through their watch.
func (m *Manager) patchShared(ctx context.Context, entries []patchEntry) error {
	var next layer
	err := m.shared.Update(ctx, func(cur []byte) ([]byte, error) {
		base := newLayer()
		if len(cur) > 0 {
			var err error
			if base, err = m.decodeCluster(cur, "cluster settings"); err != nil {
				// A broken stored document is replaced by a valid one
				// rather than blocking every change.
				m.log.Error("stored cluster settings refused, patching over them", "err", err)
				base = newLayer()
			}
		}
		m.mu.Lock()
		n, err := m.applyEntries(base, entries, ScopeCluster, "cluster settings")
		if err == nil {
			prev := m.sharedVals
			m.sharedVals = n
			_, err = m.build(m.composed())
			m.sharedVals = prev
		}
		m.mu.Unlock()
		if err != nil {
			return nil, err
		}
		next = n
		return m.encodeScope(n, ScopeCluster)
	})
	if err != nil {
		var ke *KeyError
		if errors.As(err, &ke) || errors.Is(err, ErrInvalidPatch) {
			return err
		}
		return fmt.Errorf("storing cluster settings: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sharedVals = next
	st, err := m.build(m.composed())
	if err != nil {
		return err
	}
	m.cur.Store(st)
	m.publish(st.cfg)
	m.log.Info("settings changed through the API", "scope", ScopeCluster, "store", "shared", "restartPending", m.RestartPending())
	return nil
}
