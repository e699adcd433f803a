package settings

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// TestECSClientFrom: listeners.ecsClientFrom is a node, host-only list of
// prefixes (a bare address is one host), empty by default, and refuses a
// /0, which would let every client pick its identity.
func TestECSClientFrom(t *testing.T) {
	m := mustLoad(t, "listeners:\n  ecsClientFrom: [10.96.0.10, 10.244.0.0/16, 'fd00::/64']\n")
	want := []netip.Prefix{netip.MustParsePrefix("10.96.0.10/32"), netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00::/64")}
	if got := m.Current().Listeners.ECSClientFrom; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if got := mustLoad(t, "").Current().Listeners.ECSClientFrom; len(got) != 0 {
		t.Fatalf("default %v, want empty", got)
	}
	env := mustLoad(t, "", "SERVICE_LISTENERS__ECSCLIENTFROM=10.96.0.10,10.96.0.11")
	if got := env.Current().Listeners.ECSClientFrom; len(got) != 2 {
		t.Fatalf("from the environment: %v", got)
	}
	for _, body := range []string{"listeners:\n  ecsClientFrom: [0.0.0.0/0]\n", "listeners:\n  ecsClientFrom: ['::/0']\n"} {
		_, _, err := loadYAML(t, body)
		if err == nil || !strings.Contains(err.Error(), "listeners.ecsClientFrom") || !strings.Contains(err.Error(), "trusts every peer") {
			t.Errorf("%q: err %v", body, err)
		}
	}
	k, ok := m.Key("listeners.ecsClientFrom")
	if !ok || k.Scope != ScopeNode || !slices.Contains(k.Flags, "host-only") || k.Type != "cidr[]" {
		t.Fatalf("schema %+v %v", k, ok)
	}
}
