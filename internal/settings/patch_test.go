package settings

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// withSettingsFile loads a config whose settingsFile lives in a temp dir.
func withSettingsFile(t *testing.T, extra string, env ...string) (*Manager, string) {
	t.Helper()
	dir := t.TempDir()
	sf := filepath.Join(dir, "state", "settings.yaml")
	cfg := write(t, dir, "service.yaml", "settingsFile: "+sf+"\n"+extra)
	m, err := Load(context.Background(), Options{ConfigPath: cfg, ConfigPathExplicit: true, Environ: env})
	if err != nil {
		t.Fatal(err)
	}
	return m, sf
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestPatchCluster(t *testing.T) {
	ctx := context.Background()
	m, sf := withSettingsFile(t, "cache:\n  maxEntries: 10\n", "SERVICE_BLOCKING__ENABLED=false")
	sub := m.Subscribe(t.Context())

	if err := m.PatchCluster(ctx, []byte(`{"cache":{"maxEntries":5,"minTTL":"1s"},"querylog.privacy":"nothing"}`)); err != nil {
		t.Fatal(err)
	}
	c := m.Current()
	if c.Cache.MaxEntries != 5 || c.Cache.MinTTL != time.Second || c.Querylog.Privacy != "nothing" {
		t.Errorf("after patch: %+v %q", c.Cache, c.Querylog.Privacy)
	}
	select {
	case got := <-sub:
		if got != c {
			t.Error("subscriber got another config than Current")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no config delivered to subscriber")
	}
	if m.Sources()["cache.maxEntries"] != SourceSettingsFile {
		t.Errorf("source = %s", m.Sources()["cache.maxEntries"])
	}
	// The written file is a valid settings file that a fresh start reads back.
	m2, err := Load(ctx, Options{ConfigPath: m.ConfigPath(), ConfigPathExplicit: true, Environ: []string{"SERVICE_BLOCKING__ENABLED=false"}})
	if err != nil {
		t.Fatal(err)
	}
	if m2.Current().Cache.MaxEntries != 5 || m2.Current().Querylog.Privacy != "nothing" {
		t.Errorf("reloaded from file: %+v\n%s", m2.Current().Cache, readFile(t, sf))
	}

	// null removes the override: the config file's 10 applies again.
	if err := m.PatchCluster(ctx, []byte(`{"cache":{"maxEntries":null}}`)); err != nil {
		t.Fatal(err)
	}
	if c := m.Current(); c.Cache.MaxEntries != 10 || c.Cache.MinTTL != time.Second {
		t.Errorf("after null: %+v", c.Cache)
	}
	// A null section clears every override under it.
	if err := m.PatchCluster(ctx, []byte(`{"cache":null}`)); err != nil {
		t.Fatal(err)
	}
	if c := m.Current(); c.Cache.MinTTL != 5*time.Second {
		t.Errorf("after null section: %+v", c.Cache)
	}
	if strings.Contains(readFile(t, sf), "cache") {
		t.Errorf("settings file still holds cache:\n%s", readFile(t, sf))
	}
}

func TestPatchRefusals(t *testing.T) {
	ctx := context.Background()
	m, sf := withSettingsFile(t, "", "SERVICE_BLOCKING__ENABLED=false")
	if err := m.PatchCluster(ctx, []byte(`{"blockPage":{"title":"ok"}}`)); err != nil {
		t.Fatal(err)
	}
	before := readFile(t, sf)
	cases := []struct {
		name    string
		node    bool
		patch   string
		is      error
		apiKey  string
		wantErr string
	}{
		{"host-only", false, `{"node":{"dataDir":"/x"}}`, ErrHostOnly, "host_only", "node.dataDir: host-only"},
		{"host-only on node route", true, `{"listeners.api.address":"127.0.0.1:1"}`, ErrHostOnly, "host_only", "listeners.api.address"},
		{"env locked", false, `{"blocking":{"enabled":true}}`, ErrEnvLocked, "env_locked", "blocking.enabled: set by an environment variable SERVICE_BLOCKING__ENABLED (API)"},
		{"env locked null", false, `{"blocking.enabled":null}`, ErrEnvLocked, "env_locked", "blocking.enabled"},
		{"node key on cluster route", false, `{"auth":{"localLogin":"disabled"}}`, ErrWrongScope, "invalid", "change it with PATCH /node/config"},
		{"cluster key on node route", true, `{"cache":{"maxEntries":1}}`, ErrWrongScope, "invalid", "change it with PATCH /settings"},
		{"unknown key", false, `{"cache":{"size":1}}`, ErrUnknownKey, "invalid", "cache.size: unknown key (API)"},
		{"invalid value", false, `{"cache":{"minTTL":"5x"}}`, nil, "invalid", `cache.minTTL: invalid duration "5x" (API)`},
		{"cross check", false, `{"upstreams":{"conditional":{"corp.example":"corp"}}}`, nil, "invalid", "names unknown upstream group"},
		{"not json", false, `{"cache":`, nil, "invalid", "invalid merge patch"},
		{"not an object", false, `[1]`, nil, "invalid", "invalid merge patch"},
		{"one bad key refuses all", false, `{"blockPage":{"title":"changed"},"cache":{"maxEntries":-1}}`, nil, "invalid", "cache.maxEntries"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			if c.node {
				err = m.PatchNode(ctx, []byte(c.patch))
			} else {
				err = m.PatchCluster(ctx, []byte(c.patch))
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("err = %v, want containing %q", err, c.wantErr)
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("%v is not %v", err, c.is)
			}
			if got := APIErrorKey(err); got != c.apiKey {
				t.Errorf("API key = %s, want %s", got, c.apiKey)
			}
			// The REST layer reads the key through an ErrorKey method.
			var keyed interface{ ErrorKey() string }
			if !errors.As(err, &keyed) || keyed.ErrorKey() != c.apiKey {
				t.Errorf("ErrorKey of %v wrong", err)
			}
			if readFile(t, sf) != before {
				t.Error("refused patch changed the settings file")
			}
			if m.Current().BlockPage.Title != "ok" {
				t.Error("refused patch changed the config")
			}
		})
	}
}

func TestPatchNode(t *testing.T) {
	m, _ := withSettingsFile(t, "")
	if err := m.PatchNode(context.Background(), []byte(`{"auth":{"localLogin":"admins-only","tokens":{"maxLifetime":"720h"}}}`)); err != nil {
		t.Fatal(err)
	}
	c := m.Current()
	if c.Auth.LocalLogin != "admins-only" || c.Auth.Tokens.MaxLifetime != 720*time.Hour {
		t.Errorf("auth = %+v", c.Auth)
	}
	if got := m.RestartPending(); len(got) != 1 || got[0] != "auth.localLogin" {
		t.Errorf("restart pending = %v", got)
	}
}

func TestPatchMapKeys(t *testing.T) {
	ctx := context.Background()
	m, _ := withSettingsFile(t, "upstreams:\n  groups:\n    lab:\n      servers: [10.9.0.1]\n")
	if err := m.PatchCluster(ctx, []byte(`{"upstreams":{"groups":{"corp":{"servers":["10.0.0.53:53"]}},"conditional":{"corp.example":"corp"}},"ratelimit":{"ipv4":{"24":100}}}`)); err != nil {
		t.Fatal(err)
	}
	c := m.Current()
	for _, g := range []string{"default", "lab", "corp"} {
		if _, ok := c.Upstreams.Groups[g]; !ok {
			t.Errorf("group %s missing: %v", g, c.Upstreams.Groups)
		}
	}
	if c.Ratelimit.IPv4[24] != 100 || c.Ratelimit.IPv4[32] != 600 {
		t.Errorf("ipv4 = %v", c.Ratelimit.IPv4)
	}
	// A null entry removes one map entry; the others stay.
	if err := m.PatchCluster(ctx, []byte(`{"upstreams":{"groups":{"lab":null}}}`)); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Current().Upstreams.Groups["lab"]; ok {
		t.Error("lab group still present")
	}
	if _, ok := m.Current().Upstreams.Groups["corp"]; !ok {
		t.Error("corp group lost")
	}
	// Removing a group still named by a conditional entry is refused.
	if err := m.PatchCluster(ctx, []byte(`{"upstreams":{"groups":{"corp":null}}}`)); err == nil {
		t.Error("removing a referenced group accepted")
	}
}

func TestPatchReadOnly(t *testing.T) {
	m := mustLoad(t, "")
	err := m.PatchCluster(context.Background(), []byte(`{"cache":{"maxEntries":1}}`))
	if !errors.Is(err, ErrReadOnly) || APIErrorKey(err) != "read_only" {
		t.Errorf("err = %v", err)
	}
}

func TestEffectiveRedactsWriteOnly(t *testing.T) {
	m := mustLoad(t, "tsigKeys:\n  - name: xfr.\n    algorithm: hmac-sha256\n    secretFile: /secret\n")
	if _, ok := m.Effective(true)["tsigKeys"]; ok {
		t.Error("write-only tsigKeys returned")
	}
	if len(m.Current().TSIGKeys) != 1 {
		t.Error("tsigKeys not loaded")
	}
	if _, ok := m.Effective(false)["tsigKeys"]; !ok {
		t.Error("unredacted view lacks tsigKeys")
	}
	nested := Nest(m.Effective(true))
	if c, ok := nested["cache"].(map[string]any); !ok || c["serveStale"].(map[string]any)["maxWait"] != "1800ms" {
		t.Errorf("nested = %v", nested["cache"])
	}
}

func TestAtomicWrite(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "sub", "settings.yaml")
	if err := writeFileAtomic(p, []byte("a: 1\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	// Hold the old file open: a rename leaves its content intact for readers.
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := writeFileAtomic(p, []byte("a: 2\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	old := make([]byte, 16)
	n, _ := f.Read(old)
	if string(old[:n]) != "a: 1\n" {
		t.Errorf("old reader saw %q", old[:n])
	}
	if got := readFile(t, p); got != "a: 2\n" {
		t.Errorf("content = %q", got)
	}
	st, err := os.Stat(p)
	if err != nil || st.Mode().Perm() != 0o640 {
		t.Errorf("mode = %v, %v", st.Mode(), err)
	}
	ents, _ := os.ReadDir(filepath.Dir(p))
	if len(ents) != 1 {
		t.Errorf("temp files left behind: %v", ents)
	}
}

func TestSubscribeClosesOnCancel(t *testing.T) {
	m := mustLoad(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	ch := m.Subscribe(ctx)
	cancel()
	select {
	case _, ok := <-ch:
		if ok {
			t.Error("unexpected config")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("channel not closed")
	}
}

// waitFor polls until cond holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestWatchReloads(t *testing.T) {
	m, sf := withSettingsFile(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Watch(ctx) }()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("Watch did not return")
		}
	}()
	sub := m.Subscribe(ctx)

	// A plain write (the directory exists now that Watch runs).
	waitFor(t, "settings dir", func() bool { _, err := os.Stat(filepath.Dir(sf)); return err == nil })
	if err := os.WriteFile(sf, []byte("cache:\n  maxEntries: 7\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "reload to 7", func() bool { return m.Current().Cache.MaxEntries == 7 })
	select {
	case c := <-sub:
		if c.Cache.MaxEntries != 7 {
			t.Errorf("subscriber got %d", c.Cache.MaxEntries)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("subscriber not told")
	}

	// An invalid file keeps the last good config.
	if err := os.WriteFile(sf, []byte("cache:\n  maxEntries: lots\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := m.Reload(ctx); err == nil || !strings.Contains(err.Error(), "cache.maxEntries") {
		t.Errorf("reload of invalid file: %v", err)
	}
	if m.Current().Cache.MaxEntries != 7 {
		t.Error("invalid file replaced the config")
	}

	// An atomic replace (rename over the file) is seen too.
	if err := writeFileAtomic(sf, []byte("cache:\n  maxEntries: 9\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "reload to 9", func() bool { return m.Current().Cache.MaxEntries == 9 })

	// Removing the file drops the overrides.
	if err := os.Remove(sf); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "reload to default", func() bool { return m.Current().Cache.MaxEntries == 200000 })
}

func TestValues(t *testing.T) {
	m := mustLoad(t, "tsigKeys: []\ncache:\n  maxEntries: 3\n", "SERVICE_CACHE__MINTTL=1s")
	got := map[string]Value{}
	for _, v := range m.Values(ScopeCluster) {
		got[v.Key] = v
	}
	if _, ok := got["node.dataDir"]; ok {
		t.Error("node key in cluster values")
	}
	if v := got["cache.minTTL"]; v.Source != SourceEnv || !v.ReadOnly || v.Value != "1s" {
		t.Errorf("cache.minTTL = %+v", v)
	}
	if v := got["cache.maxEntries"]; v.Source != SourceFile || v.ReadOnly {
		t.Errorf("cache.maxEntries = %+v", v)
	}
	for _, v := range m.Values("") {
		if v.Key == "tsigKeys" && (!v.Redacted || v.Value != nil || !v.ReadOnly) {
			t.Errorf("tsigKeys = %+v", v)
		}
	}
}
