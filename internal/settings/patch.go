package settings

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/svcdns/svc/internal/atomicfile"
)

const apiSource = "API"

// PatchCluster applies a JSON merge patch of cluster-scope keys (PATCH
// /settings) to the settings file. Keys may be nested objects or dotted
// paths; null removes an override (of one key, or of every key under a
// section). Map keys (upstreams.groups, upstreams.conditional,
// ratelimit.ipv4/ipv6) merge entry by entry. Nothing is written unless the
// whole result is valid.
func (m *Manager) PatchCluster(ctx context.Context, patch []byte) error {
	return m.patch(ctx, patch, ScopeCluster)
}

// PatchNode is PatchCluster for the node-scope keys the API may change
// (PATCH /node/config); host-only keys are refused with ErrHostOnly.
func (m *Manager) PatchNode(ctx context.Context, patch []byte) error {
	return m.patch(ctx, patch, ScopeNode)
}

type patchEntry struct {
	k      *key
	value  any
	prefix string // set for a null that clears a whole section
}

func (m *Manager) patch(ctx context.Context, body []byte, scope Scope) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var raw map[string]any
	if err := dec.Decode(&raw); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidPatch, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: trailing data", ErrInvalidPatch)
	}
	entries, err := m.flattenPatch(raw)
	if err != nil {
		return err
	}

	if scope == ScopeCluster && m.sharedStore() != nil {
		return m.patchShared(ctx, entries)
	}
	if err := m.patchFile(entries, scope); err != nil {
		return err
	}
	if scope == ScopeCluster {
		m.mu.Lock()
		hook := m.onCluster
		m.mu.Unlock()
		if hook != nil {
			cluster, err := m.ClusterYAML()
			if err != nil {
				return err
			}
			return hook(ctx, cluster)
		}
	}
	return nil
}

func (m *Manager) sharedStore() Shared {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.shared
}

// patchFile applies the entries to the settings file.
func (m *Manager) patchFile(entries []patchEntry, scope Scope) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.settingsPath == "" {
		return ErrReadOnly
	}
	next, err := m.applyEntries(m.settings, entries, scope, "settings file "+m.settingsPath)
	if err != nil {
		return err
	}
	st, err := m.build(m.compose(next))
	if err != nil {
		return err
	}
	if err := m.writeSettings(next); err != nil {
		return err
	}
	m.settings = next
	m.cur.Store(st)
	m.publish(st.cfg)
	m.log.Info("settings changed through the API", "scope", scope, "restartPending", m.RestartPending())
	return nil
}

// applyEntries is base with the patch entries of one scope applied; origin
// names where the values will be kept. The caller holds m.mu.
func (m *Manager) applyEntries(base layer, entries []patchEntry, scope Scope, origin string) (layer, error) {
	cur := m.cur.Load()
	next := newLayer()
	for p, v := range base.vals {
		next.vals[p], next.origin[p] = v, base.origin[p]
	}
	for _, e := range entries {
		if e.prefix != "" {
			for p := range next.vals {
				if strings.HasPrefix(p, e.prefix) && m.byPath[p].info.Scope == scope {
					delete(next.vals, p)
					delete(next.origin, p)
				}
			}
			continue
		}
		path := e.k.info.Key
		kerr := func(err error) error { return &KeyError{Key: path, Source: apiSource, Err: err} }
		switch {
		case e.k.is(FlagHostOnly):
			return layer{}, kerr(ErrHostOnly)
		case e.k.info.Scope != scope:
			route := "PATCH /settings"
			if e.k.info.Scope == ScopeNode {
				route = "PATCH /node/config"
			}
			return layer{}, kerr(fmt.Errorf("%w: %s key, change it with %s", ErrWrongScope, e.k.info.Scope, route))
		case cur.sources[path] == SourceEnv:
			return layer{}, kerr(fmt.Errorf("%w %s", ErrEnvLocked, strings.TrimPrefix(cur.origins[path], "environment ")))
		}
		if e.value == nil {
			delete(next.vals, path)
			delete(next.origin, path)
			continue
		}
		v := e.value
		if e.k.isMap {
			// Merge into what is in effect now, so a patch adding one group
			// keeps the others.
			v = mergePatch(e.k.format(cur.vals[path]), v)
		}
		t, err := e.k.parse(v)
		if err != nil {
			return layer{}, kerr(err)
		}
		next.vals[path], next.origin[path] = t, origin
	}
	return next, nil
}

// flattenPatch maps a nested or dotted merge patch to registry keys.
func (m *Manager) flattenPatch(raw map[string]any) ([]patchEntry, error) {
	var out []patchEntry
	var walk func(prefix string, tree map[string]any) error
	walk = func(prefix string, tree map[string]any) error {
		for _, name := range sortedKeys(tree) {
			path, v := prefix+name, tree[name]
			if k, ok := m.byPath[path]; ok {
				out = append(out, patchEntry{k: k, value: v})
				continue
			}
			if m.isPrefix(path) {
				if v == nil {
					out = append(out, patchEntry{prefix: path + "."})
					continue
				}
				if sub, ok := v.(map[string]any); ok {
					if err := walk(path+".", sub); err != nil {
						return err
					}
					continue
				}
			}
			return &KeyError{Key: path, Source: apiSource, Err: ErrUnknownKey}
		}
		return nil
	}
	if err := walk("", raw); err != nil {
		return nil, err
	}
	return out, nil
}

// nest turns dotted paths into the nested form the files use.
func nest(flat map[string]any) map[string]any {
	out := map[string]any{}
	for path, v := range flat {
		parts := strings.Split(path, ".")
		cur := out
		for _, p := range parts[:len(parts)-1] {
			next, ok := cur[p].(map[string]any)
			if !ok {
				next = map[string]any{}
				cur[p] = next
			}
			cur = next
		}
		cur[parts[len(parts)-1]] = v
	}
	return out
}

// Nest turns a flat map such as Effective's into nested sections.
func Nest(flat map[string]any) map[string]any { return nest(flat) }

// writeSettings stores the layer atomically: a temp file in the same
// directory, synced, then renamed over the old one, so readers and the
// watcher never see half a file.
func (m *Manager) writeSettings(l layer) error {
	flat := make(map[string]any, len(l.vals))
	for p, v := range l.vals {
		flat[p] = m.byPath[p].format(v)
	}
	body, err := yaml.Marshal(nest(flat))
	if err != nil {
		return fmt.Errorf("encoding settings file: %w", err)
	}
	if len(flat) == 0 {
		body = []byte("{}\n")
	}
	header := "# Written by the service on API changes (PATCH /settings, PATCH /node/config).\n# Edits are picked up while running; invalid content is ignored with an error log.\n"
	return writeFileAtomic(m.settingsPath, append([]byte(header), body...), 0o640)
}

func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return fmt.Errorf("settings file directory: %w", err)
	}
	if err := atomicfile.Write(path, data, mode); err != nil {
		return fmt.Errorf("writing settings file: %w", err)
	}
	return nil
}
