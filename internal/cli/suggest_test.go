package cli

import (
	"net/url"
	"strings"
	"testing"

	"github.com/svcdns/svc/internal/querylog"
)

func TestSuggest(t *testing.T) {
	for _, tc := range []struct {
		typed string
		cands []string
		want  string
	}{
		{"alow", []string{"allow", "deny", "list"}, "allow"},
		{"blokced", logStatuses, "blocked"},
		{"dnszone", []string{"dnszones", "dnsrecordsets", "policies"}, "dnszones"},
		{"cache.maxentries", []string{"cache.maxEntries", "cache.prefetch"}, "cache.maxEntries"},
		{"zzzzzz", []string{"allow"}, ""},
	} {
		got := suggest(tc.typed, tc.cands)
		if tc.want == "" {
			if len(got) != 0 {
				t.Errorf("suggest(%q) = %v, want none", tc.typed, got)
			}
			continue
		}
		if len(got) == 0 || got[0] != tc.want {
			t.Errorf("suggest(%q) = %v, want %q first", tc.typed, got, tc.want)
		}
	}
}

// TestLogStatusesAccepted keeps the CLI's lists in step with the server's.
func TestLogStatusesAccepted(t *testing.T) {
	for _, s := range logStatuses {
		if _, err := querylog.ParseFilter(url.Values{"status": {s}}); err != nil {
			t.Errorf("status %q: %v", s, err)
		}
	}
	for _, s := range logStatusClasses {
		if _, err := querylog.ParseFilter(url.Values{"status_class": {s}}); err != nil {
			t.Errorf("status class %q: %v", s, err)
		}
	}
}

func TestParseDurationNamesTheFix(t *testing.T) {
	if _, err := parseDuration("--expires-in", "7d"); err == nil || !contains(err.Error(), "168h") {
		t.Errorf("7d: %v", err)
	}
	if _, err := parseDuration("duration", "five minutes"); err == nil || !contains(err.Error(), "5m") || !contains(err.Error(), "1h30m") {
		t.Errorf("five minutes: %v", err)
	}
	if d, err := parseDuration("duration", "1h30m"); err != nil || d.Minutes() != 90 {
		t.Errorf("1h30m: %v %v", d, err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
