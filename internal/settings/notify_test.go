package settings

import (
	"strings"
	"testing"
	"time"
)

// TestNotifySection: the notify section loads, and each kind of bad value
// is refused naming the key, the item and what to write instead.
func TestNotifySection(t *testing.T) {
	m := mustLoad(t, `notify:
  timeout: 500ms
  retries: 4
  source: 192.0.2.9
  targets:
    - {zone: example.test, addresses: ["192.0.2.53", "[2001:db8::53]:5353"], tsigKey: k1}
    - {zone: "*", addresses: ["198.51.100.7:53"]}
`)
	n := m.Current().Notify
	if !n.Enabled || n.FromNS || n.Timeout != 500*time.Millisecond || n.Retries != 4 || n.Source != "192.0.2.9" || len(n.Targets) != 2 {
		t.Fatalf("notify = %+v", n)
	}
	if tg := n.Targets[0]; tg.Zone != "example.test" || tg.TSIGKey != "k1" || strings.Join(tg.Addresses, ",") != "192.0.2.53,[2001:db8::53]:5353" {
		t.Fatalf("target = %+v", tg)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"notify:\n  targets:\n    - {zone: example.test, addresses: [ns1.example.test]}\n", "host names are not resolved"},
		{"notify:\n  targets:\n    - {zone: example.test}\n", "addresses"},
		{"notify:\n  targets:\n    - {zone: example.test, addresses: []}\n", "at least one secondary"},
		{"notify:\n  targets:\n    - {zone: 'bad zone', addresses: [192.0.2.1]}\n", "zone"},
		{"notify:\n  source: somewhere\n", "want an IP address"},
		{"notify:\n  retries: 11\n", "0 to 10"},
		{"notify:\n  timeout: 1ms\n", "at least"},
	} {
		_, _, err := loadYAML(t, tc.yaml)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want it to say %q", tc.yaml, err, tc.want)
		}
	}
}
