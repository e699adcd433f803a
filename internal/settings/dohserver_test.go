package settings

import (
	"strings"
	"testing"
)

// TestDoHServer: listeners.dohServer is a node setting, lean by default,
// stdlib from the file or the environment, and anything else is refused
// naming the key and the choices.
func TestDoHServer(t *testing.T) {
	if got := mustLoad(t, "").Current().Listeners.DoHServer; got != "lean" {
		t.Fatalf("default %q, want lean", got)
	}
	if got := mustLoad(t, "listeners:\n  dohServer: stdlib\n").Current().Listeners.DoHServer; got != "stdlib" {
		t.Fatalf("from the file: %q", got)
	}
	if got := mustLoad(t, "", "SERVICE_LISTENERS__DOHSERVER=stdlib").Current().Listeners.DoHServer; got != "stdlib" {
		t.Fatalf("from the environment: %q", got)
	}
	_, _, err := loadYAML(t, "listeners:\n  dohServer: nethttp\n")
	if err == nil || !strings.Contains(err.Error(), "listeners.dohServer") || !strings.Contains(err.Error(), "stdlib") {
		t.Fatalf("bad value: %v", err)
	}
	t.Logf("bad value: %v", err)
	k, ok := mustLoad(t, "").Key("listeners.dohServer")
	if !ok || k.Scope != ScopeNode {
		t.Fatalf("schema %+v %v", k, ok)
	}
}
