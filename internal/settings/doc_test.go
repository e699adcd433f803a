package settings

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/settings.md from the registry")

const docPath = "../../docs/settings.md"

// TestDocs fails when docs/settings.md drifts from the registry.
func TestDocs(t *testing.T) {
	got := Markdown()
	if *update {
		if err := os.WriteFile(docPath, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/settings -run TestDocs -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("docs/settings.md is out of date: run go test ./internal/settings -run TestDocs -update")
	}
	for _, k := range registry() {
		if !strings.Contains(string(got), "| `"+k.info.Key+"` |") {
			t.Errorf("doc lacks %s", k.info.Key)
		}
	}
}

// FuzzDecodeConfig feeds arbitrary bytes to the config file decoder: it must
// not panic, and whatever it accepts must survive a write and re-read
// unchanged (the settings file depends on that).
func FuzzDecodeConfig(f *testing.F) {
	for _, s := range []string{
		"",
		"cache:\n  maxEntries: 5\n  minTTL: 5x\n",
		"cache.maxEntries: 0\n",
		"listeners:\n  dns:\n    - address: 127.0.0.1:53\n      protocols: [udp]\n",
		"upstreams:\n  groups:\n    corp: {servers: [tls://1.1.1.1:853], strategy: strict, timeout: 1s}\n  conditional: {corp.example: corp}\n",
		"ratelimit:\n  ipv4: {24: 10, 32: 0}\n  ipv6: {64: 5}\n",
		"querylog:\n  retention: {maxDBBytes: 10GiB, raw: 24h}\n  exclude: {domains: ['*.a.example', '/x+/']}\n",
		"tsigKeys: [{name: k., algorithm: hmac-sha512, secretFile: /s}]\n",
		"objects: [{kind: DNSZone, metadata: {name: a.}}]\n",
		"blocking: {customIP: {v4: 192.0.2.1, v6: '::1'}}\n",
		"a: &x {b: *x}\n",
		"- 1\n",
		"{]",
	} {
		f.Add([]byte(s))
	}
	keys := registry()
	m := &Manager{keys: keys, byPath: map[string]*key{}}
	for _, k := range keys {
		m.byPath[k.info.Key] = k
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := m.decodeFile(data, "fuzz")
		if err != nil {
			return
		}
		flat := m.formatLayer(l)
		j, err := json.Marshal(nest(flat))
		if err != nil {
			t.Fatalf("accepted value does not encode: %v", err)
		}
		l2, err := m.decodeFile(j, "fuzz")
		if err != nil {
			t.Fatalf("re-read of written form failed: %v\n%s", err, j)
		}
		if !reflect.DeepEqual(m.formatLayer(l2), flat) {
			t.Fatalf("round trip changed values:\n%v\n%v", flat, m.formatLayer(l2))
		}
		// The whole build must not panic either.
		m2 := &Manager{keys: keys, byPath: m.byPath, file: l, env: newLayer()}
		_, _ = m2.build(newLayer())
		_ = context.Background()
	})
}
