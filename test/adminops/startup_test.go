package adminops_test

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// listsAndPolicy is a policy naming block and allow lists, all stored
// before the node starts (the objects dir is applied first).
const listsAndPolicy = `apiVersion: service.io/v1alpha1
kind: BlockList
metadata: {name: ads, namespace: default}
spec:
  sources:
    - inline: ["||ads.example.net^"]
---
apiVersion: service.io/v1alpha1
kind: BlockList
metadata: {name: trackers, namespace: default}
spec:
  sources:
    - inline: ["||trackers.example.net^"]
---
apiVersion: service.io/v1alpha1
kind: BlockList
metadata: {name: fine, namespace: default}
spec:
  mode: allow
  sources:
    - inline: ["||fine.ads.example.net^"]
---
apiVersion: service.io/v1alpha1
kind: Policy
metadata: {name: everyone, namespace: default}
spec:
  blockListRefs: [ads, trackers]
  allowListRefs: [fine]
---
apiVersion: service.io/v1alpha1
kind: Policy
metadata: {name: typo, namespace: default}
spec:
  priority: 5
  blockListRefs: [trackerz]
`

// listWarningRE matches the start-up warnings about lists a policy names
// that were not compiled yet (UnknownList, ListNotLoaded).
var listWarningRE = regexp.MustCompile(`(?m)^.*(UnknownList|ListNotLoaded|is not loaded|does not exist).*$`)

// typoWarning is the one warning that must stay: a list no one created.
const typoWarning = "block list default/trackerz does not exist"

// listWarnings are the lines of log about lists, but the typo's.
func listWarnings(t *testing.T, log string) []string {
	t.Helper()
	var out []string
	typo := false
	for _, l := range listWarningRE.FindAllString(log, -1) {
		if strings.Contains(l, typoWarning) {
			typo = true
			continue
		}
		out = append(out, l)
	}
	if !typo {
		t.Errorf("no warning about the list a policy names that does not exist (%q): held warnings must come once the lists are loaded", typoWarning)
	}
	return out
}

// TestStartupNoListWarnings: policies used to compile before the lists they
// name were loaded, so every start logged a warning for every list. The log
// of a start (and a restart on the same state) must have none, and the
// policy must block once the node is up; a list that truly does not exist
// is still reported.
func TestStartupNoListWarnings(t *testing.T) {
	s := startServer(t, serverOpt{objects: map[string]string{"lists.yaml": listsAndPolicy}})
	waitBlocked(t, s)
	// a little longer: warnings of builds after the first would come now
	time.Sleep(300 * time.Millisecond)
	if m := listWarnings(t, s.Log()); len(m) > 0 {
		t.Errorf("start-up logged list warnings:\n%s", joinLines(m))
	}
	s2 := s.restart(t)
	waitBlocked(t, s2)
	time.Sleep(300 * time.Millisecond)
	if m := listWarnings(t, s2.Log()); len(m) > 0 {
		t.Errorf("restart logged list warnings:\n%s", joinLines(m))
	}
}

func waitBlocked(t *testing.T, s *server) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, _ := dig(t, s.DNS, "ads.example.net", "A")
		if got == "0.0.0.0" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ads.example.net not blocked 20s after start: %q", got)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got, _ := dig(t, s.DNS, "trackers.example.net", "A"); got != "0.0.0.0" {
		t.Errorf("trackers.example.net: %q, want blocked", got)
	}
}

func joinLines(ls []string) string {
	out := ""
	for _, l := range ls {
		out += l + "\n"
	}
	return out
}
