// Package settings holds the registry of every configuration key, reads the
// layered sources (built-in default < config file < settings file <
// environment), validates them and hands out an immutable typed *Config. It
// also applies API merge patches to the settings file and watches that file.
package settings

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"sigs.k8s.io/yaml"
)

// DefaultConfigPath is read when no --config is given; its absence is fine.
const DefaultConfigPath = "/etc/service/service.yaml"

// EnvPrefix starts every settings environment variable.
const EnvPrefix = "SERVICE_"

// apiError is a sentinel that also carries its REST API error key.
type apiError struct{ msg, key string }

func (e *apiError) Error() string    { return e.msg }
func (e *apiError) ErrorKey() string { return e.key }

var (
	// ErrUnknownKey: the name matches no key of the registry.
	ErrUnknownKey error = &apiError{"unknown key", "invalid"}
	// ErrHostOnly: the key is set only by the config file or environment (API key host_only).
	ErrHostOnly error = &apiError{"host-only key: set it in the config file or the environment", "host_only"}
	// ErrEnvLocked: an environment variable sets the key, so the API cannot (API key env_locked).
	ErrEnvLocked error = &apiError{"set by an environment variable", "env_locked"}
	// ErrWrongScope: the key belongs to the other scope's route.
	ErrWrongScope error = &apiError{"wrong scope", "invalid"}
	// ErrFileOnly: list and map keys cannot come from the environment.
	ErrFileOnly error = &apiError{"list and map keys can only be set in a file", "invalid"}
	// ErrReadOnly: no settingsFile is configured, so nothing can be changed (API key read_only).
	ErrReadOnly error = &apiError{"settings are read-only: no settingsFile is configured", "read_only"}
	// ErrInvalidPatch: the body is not a JSON object.
	ErrInvalidPatch error = &apiError{"invalid merge patch", "invalid"}
)

// KeyError names the key and the source (config file, settings file,
// environment variable, API) of a refused value.
type KeyError struct {
	Key    string
	Source string
	Err    error
}

func (e *KeyError) Error() string {
	s := e.Key + ": " + e.Err.Error()
	if e.Source != "" {
		s += " (" + e.Source + ")"
	}
	return s
}

func (e *KeyError) Unwrap() error { return e.Err }

// ErrorKey is the REST API error key of the refusal.
func (e *KeyError) ErrorKey() string { return APIErrorKey(e.Err) }

// APIErrorKey maps an error of this package to the stable error key of the
// REST API: host_only, env_locked, read_only or invalid.
func APIErrorKey(err error) string {
	var a *apiError
	if errors.As(err, &a) {
		return a.key
	}
	return "invalid"
}

// Source says which layer an effective value came from.
type Source string

const (
	SourceDefault      Source = "default"
	SourceFile         Source = "file"
	SourceSettingsFile Source = "settingsFile"
	SourceEnv          Source = "env"
)

// NonSettingEnv lists the SERVICE_ variables that are read elsewhere and are
// not settings; they (and their _FILE forms) must not stop the server. This
// is the one place that list lives.
func NonSettingEnv() []string {
	return []string{"SERVICE_ENCRYPTION_KEY", "SERVICE_ENCRYPTION_KEY_PREVIOUS", "SERVICE_ADMIN_PASSWORD",
		"SERVICE_BOOTSTRAP_TOKEN", "SERVICE_SERVER", "SERVICE_TOKEN", "SERVICE_CONTEXT",
		"SERVICE_CLI_CONFIG", "SERVICE_KEYRING", "SERVICE_ADMIN_SOCKET",
		"SERVICE_NAMESPACE", "SERVICE_POD_NAME", "SERVICE_INTERNAL_PEERS"}
}

func nonSettingEnv(upper string) bool {
	return slices.Contains(NonSettingEnv(), strings.TrimSuffix(upper, "_FILE"))
}

// EnvName is the environment variable of a key path, e.g. cache.maxEntries ->
// SERVICE_CACHE__MAXENTRIES.
func EnvName(path string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(path, ".", "__"))
}

// layer is one source's values, typed, plus where each came from.
type layer struct {
	vals   map[string]any
	origin map[string]string // "config file /x.yaml", "environment SERVICE_X"
}

func newLayer() layer { return layer{vals: map[string]any{}, origin: map[string]string{}} }

// state is one consistent effective view.
type state struct {
	cfg     *Config
	vals    map[string]any
	sources map[string]Source
	origins map[string]string
}

// Options configure Load.
type Options struct {
	// ConfigPath is the config file; empty means DefaultConfigPath.
	ConfigPath string
	// ConfigPathExplicit makes a missing config file an error (--config given).
	ConfigPathExplicit bool
	// Environ is the process environment (os.Environ()).
	Environ []string
	Logger  *slog.Logger
}

// Manager owns the layers and the current *Config.
type Manager struct {
	log        *slog.Logger
	keys       []*key
	byPath     map[string]*key
	configPath string

	// mu serialises changes of the settings layer (API patches, file reloads).
	mu           sync.Mutex
	file, env    layer
	settings     layer
	settingsPath string
	cur          atomic.Pointer[state]
	initial      *state

	subMu sync.Mutex
	subs  map[chan *Config]struct{}

	// shared holds the cluster-scope keys when several nodes share them
	// (shared.go); sharedVals is what it held last.
	shared     Shared
	useShared  bool
	sharedVals layer
	// onCluster runs after a PATCH /settings of this node's settings file.
	onCluster func(ctx context.Context, cluster []byte) error
}

// Load reads every layer, validates it and returns a Manager holding the
// result. An unknown SERVICE_ variable, unknown file key or invalid value is
// an error naming the key and its source.
func Load(ctx context.Context, opts Options) (*Manager, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Manager{log: log, keys: registry(), byPath: map[string]*key{}, subs: map[chan *Config]struct{}{}}
	for _, k := range m.keys {
		m.byPath[k.info.Key] = k
	}
	m.configPath = opts.ConfigPath
	if m.configPath == "" {
		m.configPath = DefaultConfigPath
	}
	m.file, m.sharedVals = newLayer(), newLayer()
	data, err := os.ReadFile(m.configPath)
	switch {
	case err == nil:
		if m.file, err = m.decodeFile(data, "config file "+m.configPath); err != nil {
			return nil, err
		}
	case errors.Is(err, fs.ErrNotExist) && !opts.ConfigPathExplicit:
		log.Debug("no config file, using defaults", "path", m.configPath)
	default:
		return nil, fmt.Errorf("reading config file: %w", err)
	}
	if m.env, err = m.decodeEnv(opts.Environ); err != nil {
		return nil, err
	}
	m.settingsPath = m.pick("settingsFile").(string)
	m.settings = newLayer()
	if m.settingsPath != "" {
		if m.settings, err = m.readSettingsFile(); err != nil {
			return nil, err
		}
	}
	st, err := m.build(m.settings)
	if err != nil {
		return nil, err
	}
	m.cur.Store(st)
	m.initial = st
	return m, nil
}

// pick reads a key from the file and env layers only (settingsFile is
// needed before the settings layer exists).
func (m *Manager) pick(path string) any {
	if v, ok := m.env.vals[path]; ok {
		return v
	}
	if v, ok := m.file.vals[path]; ok {
		return v
	}
	return m.byPath[path].def
}

// DecodeYAML turns config or settings file bytes into decoded values
// (map[string]any with json.Number numbers), refusing duplicate keys.
func DecodeYAML(data []byte) (map[string]any, error) {
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	switch t := v.(type) {
	case nil:
		return map[string]any{}, nil
	case map[string]any:
		return t, nil
	default:
		return nil, fmt.Errorf("top level must be a mapping, got %s", kindOf(v))
	}
}

// decodeFile parses a config or settings file into a typed layer.
func (m *Manager) decodeFile(data []byte, source string) (layer, error) {
	raw, err := DecodeYAML(data)
	if err != nil {
		return layer{}, fmt.Errorf("%s: %w", source, err)
	}
	return m.decodeTree(raw, source)
}

// decodeTree walks nested maps (and dotted keys) down to registry keys.
func (m *Manager) decodeTree(raw map[string]any, source string) (layer, error) {
	l := newLayer()
	var walk func(prefix string, tree map[string]any) error
	walk = func(prefix string, tree map[string]any) error {
		for _, name := range sortedKeys(tree) {
			path := prefix + name
			v := tree[name]
			if k, ok := m.byPath[path]; ok {
				if _, dup := l.vals[path]; dup {
					return &KeyError{Key: path, Source: source, Err: errors.New("set twice")}
				}
				t, err := k.parse(v)
				if err != nil {
					return &KeyError{Key: path, Source: source, Err: err}
				}
				l.vals[path], l.origin[path] = t, source
				continue
			}
			sub, isMap := v.(map[string]any)
			if isMap && m.isPrefix(path) {
				if err := walk(path+".", sub); err != nil {
					return err
				}
				continue
			}
			return &KeyError{Key: path, Source: source, Err: ErrUnknownKey}
		}
		return nil
	}
	if err := walk("", raw); err != nil {
		return layer{}, err
	}
	return l, nil
}

func (m *Manager) isPrefix(p string) bool {
	p += "."
	for _, k := range m.keys {
		if strings.HasPrefix(k.info.Key, p) {
			return true
		}
	}
	return false
}

// decodeEnv reads SERVICE_<SECTION>__<KEY>[_FILE] variables.
func (m *Manager) decodeEnv(environ []string) (layer, error) {
	index := make(map[string]*key, len(m.keys))
	for _, k := range m.keys {
		index[EnvName(k.info.Key)] = k
	}
	l := newLayer()
	for _, kv := range environ {
		name, val, _ := strings.Cut(kv, "=")
		// Key names are camelCase, so matching is case-insensitive.
		upper := strings.ToUpper(name)
		if !strings.HasPrefix(upper, EnvPrefix) || nonSettingEnv(upper) {
			continue
		}
		k, ok := index[upper]
		fromFile := false
		if !ok && strings.HasSuffix(upper, "_FILE") {
			k, ok = index[strings.TrimSuffix(upper, "_FILE")]
			fromFile = ok
		}
		if !ok {
			return layer{}, fmt.Errorf("environment variable %s names no setting", name)
		}
		source := "environment " + name
		path := k.info.Key
		if !k.envOK {
			return layer{}, &KeyError{Key: path, Source: source, Err: ErrFileOnly}
		}
		if prev, dup := l.origin[path]; dup {
			return layer{}, &KeyError{Key: path, Source: source, Err: fmt.Errorf("also set by %s", prev)}
		}
		if fromFile {
			b, err := os.ReadFile(val)
			if err != nil {
				return layer{}, &KeyError{Key: path, Source: source, Err: fmt.Errorf("reading value file: %w", err)}
			}
			val = strings.TrimRight(string(b), "\r\n")
		}
		t, err := k.parse(val)
		if err != nil {
			return layer{}, &KeyError{Key: path, Source: source, Err: err}
		}
		l.vals[path], l.origin[path] = t, source
	}
	return l, nil
}

func (m *Manager) readSettingsFile() (layer, error) {
	source := "settings file " + m.settingsPath
	data, err := os.ReadFile(m.settingsPath)
	if errors.Is(err, fs.ErrNotExist) {
		return newLayer(), nil
	}
	if err != nil {
		return layer{}, fmt.Errorf("reading settings file: %w", err)
	}
	l, err := m.decodeFile(data, source)
	if err != nil {
		return layer{}, err
	}
	for _, path := range sortedKeys(l.vals) {
		if m.byPath[path].is(FlagHostOnly) {
			return layer{}, &KeyError{Key: path, Source: source, Err: ErrHostOnly}
		}
	}
	return l, nil
}

// build overlays the layers and validates the result as a whole.
func (m *Manager) build(settings layer) (*state, error) {
	st := &state{cfg: &Config{}, vals: map[string]any{}, sources: map[string]Source{}, origins: map[string]string{}}
	for _, k := range m.keys {
		path := k.info.Key
		v, src, origin := k.def, SourceDefault, "default"
		for _, l := range []struct {
			l   layer
			src Source
		}{{m.file, SourceFile}, {settings, SourceSettingsFile}, {m.env, SourceEnv}} {
			if lv, ok := l.l.vals[path]; ok {
				v, src, origin = lv, l.src, l.l.origin[path]
			}
		}
		if k.mergeDefault && src != SourceDefault {
			merged, err := k.parse(mergePatch(k.format(k.def), k.format(v)))
			if err != nil {
				return nil, &KeyError{Key: path, Source: origin, Err: err}
			}
			v = merged
		}
		k.set(st.cfg, v)
		st.vals[path], st.sources[path], st.origins[path] = v, src, origin
	}
	if st.cfg.Blocking.ListsDir == "" {
		st.cfg.Blocking.ListsDir = filepath.Join(st.cfg.Node.DataDir, "lists")
	}
	if err := m.crossCheck(st); err != nil {
		return nil, err
	}
	return st, nil
}

// crossCheck enforces rules that involve more than one key.
func (m *Manager) crossCheck(st *state) error {
	c := st.cfg
	fail := func(path string, err error) error {
		return &KeyError{Key: path, Source: st.origins[path], Err: err}
	}
	for _, suffix := range sortedKeys(c.Upstreams.Conditional) {
		if g := c.Upstreams.Conditional[suffix]; c.Upstreams.Groups[g].Servers == nil {
			return fail("upstreams.conditional", fmt.Errorf("suffix %q names unknown upstream group %q", suffix, g))
		}
	}
	if c.Cache.MaxTTL != 0 && c.Cache.MinTTL > c.Cache.MaxTTL {
		return fail("cache.minTTL", fmt.Errorf("%s is above cache.maxTTL %s", formatDuration(c.Cache.MinTTL), formatDuration(c.Cache.MaxTTL)))
	}
	if c.Listeners.ProxyProtocolSecretFile == "" {
		for _, p := range c.Listeners.ProxyProtocolFrom {
			if !p.Addr().IsLoopback() {
				return fail("listeners.proxyProtocolSecretFile", fmt.Errorf("required because listeners.proxyProtocolFrom holds the non-loopback peer %s", p))
			}
		}
	}
	for i, t := range c.Publish.Targets {
		if t.TSIGKey != "" && !hasTSIGKey(c.TSIGKeys, t.TSIGKey) {
			return fail("publish.targets", fmt.Errorf("item %d: tsigKey %q is not in tsigKeys: add it there (name, algorithm, secretFile) or name one of its keys", i, t.TSIGKey))
		}
	}
	if c.BlockPage.Enabled && !c.BlockPage.IPv4.IsValid() && !c.BlockPage.IPv6.IsValid() &&
		!specificHost(c.Listeners.BlockPage.HTTP) && !specificHost(c.Listeners.BlockPage.HTTPS) {
		return fail("blockPage.enabled", errors.New("no block page address: set blockPage.ipv4 or blockPage.ipv6, or give listeners.blockPage.http a specific IP"))
	}
	return nil
}

// hasTSIGKey reports whether keys holds name (domain names compare
// without case and trailing dot).
func hasTSIGKey(keys []TSIGKey, name string) bool {
	for _, k := range keys {
		if strings.EqualFold(strings.TrimSuffix(k.Name, "."), strings.TrimSuffix(name, ".")) {
			return true
		}
	}
	return false
}

// specificHost tells whether a listener address names one usable IP.
func specificHost(hp string) bool {
	i := strings.LastIndex(hp, ":")
	if i < 0 {
		return false
	}
	a, err := netip.ParseAddr(strings.Trim(hp[:i], "[]"))
	return err == nil && !a.IsUnspecified()
}

// mergePatch applies an RFC 7386 merge patch to a decoded value.
func mergePatch(base, patch any) any {
	pm, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	bm, _ := base.(map[string]any)
	out := make(map[string]any, len(bm)+len(pm))
	for k, v := range bm {
		out[k] = v
	}
	for k, v := range pm {
		if v == nil {
			delete(out, k)
			continue
		}
		out[k] = mergePatch(out[k], v)
	}
	return out
}

// Current is the effective configuration; callers must not modify it.
func (m *Manager) Current() *Config { return m.cur.Load().cfg }

// ConfigPath is the config file that was read (or looked for).
func (m *Manager) ConfigPath() string { return m.configPath }

// SettingsPath is the settings file; empty when none is configured.
func (m *Manager) SettingsPath() string { return m.settingsPath }

// Schema describes every key (GET /settings/_schema), in registry order.
func (m *Manager) Schema() []KeyInfo { return schema(m.keys) }

func schema(keys []*key) []KeyInfo {
	out := make([]KeyInfo, 0, len(keys))
	for _, k := range keys {
		info := k.info
		info.Default = k.format(k.def)
		if k.envOK {
			info.Env = EnvName(k.info.Key)
		}
		out = append(out, info)
	}
	return out
}

// Effective returns every key's effective value in its file form (durations
// as strings, sizes as 10GiB), keyed by dotted path. With redactWriteOnly,
// write-only keys are left out.
func (m *Manager) Effective(redactWriteOnly bool) map[string]any {
	st := m.cur.Load()
	out := make(map[string]any, len(m.keys))
	for _, k := range m.keys {
		if redactWriteOnly && k.is(FlagWriteOnly) {
			continue
		}
		out[k.info.Key] = k.format(st.vals[k.info.Key])
	}
	return out
}

// Sources tells for every key which layer its effective value came from.
func (m *Manager) Sources() map[string]Source {
	st := m.cur.Load()
	out := make(map[string]Source, len(st.sources))
	for k, v := range st.sources {
		out[k] = v
	}
	return out
}

// Origin names where a key's value came from, e.g. "environment
// SERVICE_CACHE__MAXENTRIES" or "config file /etc/service/service.yaml".
func (m *Manager) Origin(path string) string { return m.cur.Load().origins[path] }

// Key describes one key; ok is false for an unknown path.
func (m *Manager) Key(path string) (KeyInfo, bool) {
	k, ok := m.byPath[path]
	if !ok {
		return KeyInfo{}, false
	}
	return schema([]*key{k})[0], true
}

// MarkStarted takes the settings in force as those the process started
// with: RestartPending compares with them. A node that reads shared cluster
// settings before starting anything calls it after that first read.
func (m *Manager) MarkStarted() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.initial = m.cur.Load()
}

// RestartPending lists restart and host-only keys whose effective value
// differs from the one the process started with.
func (m *Manager) RestartPending() []string {
	st := m.cur.Load()
	var out []string
	for _, k := range m.keys {
		if !k.is(FlagRestart) {
			continue
		}
		p := k.info.Key
		if !reflect.DeepEqual(k.format(st.vals[p]), k.format(m.initial.vals[p])) {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// Subscribe delivers each new *Config after a change of the settings layer
// (API patch or settings file reload). Slow readers see only the newest
// config. The channel closes when ctx ends.
func (m *Manager) Subscribe(ctx context.Context) <-chan *Config {
	ch := make(chan *Config, 1)
	m.subMu.Lock()
	m.subs[ch] = struct{}{}
	m.subMu.Unlock()
	go func() {
		<-ctx.Done()
		m.subMu.Lock()
		delete(m.subs, ch)
		close(ch)
		m.subMu.Unlock()
	}()
	return ch
}

func (m *Manager) publish(c *Config) {
	m.subMu.Lock()
	defer m.subMu.Unlock()
	for ch := range m.subs {
		select {
		case <-ch: // drop the unread older config
		default:
		}
		ch <- c
	}
}

// Value is one key's effective value with its provenance (GET /settings).
type Value struct {
	Key    string `json:"key"`
	Value  any    `json:"value,omitempty"`
	Source Source `json:"source"`
	Scope  Scope  `json:"scope"`
	// ReadOnly is true when the API cannot change the key: host-only or set
	// by the environment.
	ReadOnly bool `json:"readOnly"`
	// Redacted is true for write-only keys whose value is left out.
	Redacted bool `json:"redacted,omitempty"`
}

// Values lists every key of the given scope (empty: all) in registry order,
// with write-only values left out.
func (m *Manager) Values(scope Scope) []Value {
	st := m.cur.Load()
	out := make([]Value, 0, len(m.keys))
	for _, k := range m.keys {
		p := k.info.Key
		if scope != "" && k.info.Scope != scope {
			continue
		}
		v := Value{Key: p, Source: st.sources[p], Scope: k.info.Scope,
			ReadOnly: k.is(FlagHostOnly) || st.sources[p] == SourceEnv}
		if k.is(FlagWriteOnly) {
			v.Redacted = true
		} else {
			v.Value = k.format(st.vals[p])
		}
		out = append(out, v)
	}
	return out
}
