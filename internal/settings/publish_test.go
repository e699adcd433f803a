package settings

import (
	"strings"
	"testing"
	"time"
)

// TestPublishSection: publish.targets loads with its defaults, and each
// kind of bad value is refused naming the key, the item and the fix.
func TestPublishSection(t *testing.T) {
	m := mustLoad(t, `tsigKeys:
  - {name: pub-key, algorithm: hmac-sha256, secretFile: /dev/null}
publish:
  targets:
    - {name: public-dns, type: rfc2136, server: 192.0.2.53, zone: example.com, tsigKey: pub-key.}
    - {name: lab, type: rfc2136, server: "[2001:db8::53]:5353", zone: lab.example.com, timeout: 2s}
`)
	tg := m.Current().Publish.Targets
	if len(tg) != 2 {
		t.Fatalf("targets = %+v", tg)
	}
	if tg[0].Server != "192.0.2.53:53" || tg[0].Timeout != 5*time.Second || tg[0].TSIGKey != "pub-key." || tg[0].Zone != "example.com" {
		t.Errorf("target 0 = %+v", tg[0])
	}
	if tg[1].Server != "[2001:db8::53]:5353" || tg[1].Timeout != 2*time.Second || tg[1].TSIGKey != "" {
		t.Errorf("target 1 = %+v", tg[1])
	}
	item := func(s string) string { return "publish:\n  targets:\n    - " + s + "\n" }
	for _, tc := range []struct{ yaml, want string }{
		{item("{name: a, type: rfc2136, zone: example.com}"), "server"},
		{item("{name: a, type: nsupdate, server: 192.0.2.1, zone: example.com}"), "want one of rfc2136"},
		{item("{name: external-dns, type: rfc2136, server: 192.0.2.1, zone: example.com}"), "reserved for a second external-dns"},
		{item("{name: 'a b', type: rfc2136, server: 192.0.2.1, zone: example.com}"), "label value"},
		{item("{name: a, type: rfc2136, server: 192.0.2.1:0, zone: example.com}"), "bad port"},
		{item("{name: a, type: rfc2136, server: 192.0.2.1, zone: 'bad zone'}"), "zone"},
		{item("{name: a, type: rfc2136, server: 192.0.2.1, zone: example.com, timeout: 2h}"), "100ms to 1m"},
		{item("{name: a, type: rfc2136, server: 192.0.2.1, zone: example.com, tsigKey: nokey}"), `tsigKey "nokey" is not in tsigKeys`},
		{item("{name: a, type: rfc2136, server: 192.0.2.1, zone: example.com, extra: 1}"), "extra"},
		{"publish:\n  targets:\n    - {name: a, type: rfc2136, server: 192.0.2.1, zone: a.com}\n    - {name: a, type: rfc2136, server: 192.0.2.2, zone: b.com}\n", "repeated name"},
	} {
		_, _, err := loadYAML(t, tc.yaml)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "publish.targets") {
			t.Errorf("%q: err %v, want it to name publish.targets and say %q", tc.yaml, err, tc.want)
		}
	}
}
