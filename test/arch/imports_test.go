// Package arch guards the dependency direction of DESIGN.md: the object model imports
// nothing of ours, the data plane never learns where a snapshot came from, and the
// REST API reaches the data plane only through narrow interfaces.
package arch

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/svcdns/svc"

// rules: for each protected package pattern, import path prefixes it must never
// depend on, directly or through another package.
var rules = []struct {
	pkgs      string
	forbidden []string
	allowed   []string // exceptions to forbidden, exact import paths
}{
	{"./api/...", []string{module + "/internal", module + "/dataplane", module + "/controllers", module + "/cmd"}, nil},
	{"./dataplane/...", []string{module + "/internal", module + "/controllers", module + "/cmd",
		"github.com/danielgtaylor/huma", "sigs.k8s.io/controller-runtime", "modernc.org/sqlite", "k8s.io/client-go"}, nil},
	// dataplane/authority is the zone compile step (it imports only the object
	// model): status and zone export come from the code that builds what is
	// served, never from a second rule set. dataplane/prefetch, which it
	// imports, is a leaf of CPU cache hints with no imports of the module.
	{"./controllers/...", []string{module + "/dataplane", module + "/internal/api", module + "/cmd"}, []string{module + "/dataplane/authority", module + "/dataplane/prefetch"}},
	{"./internal/api/...", []string{module + "/controllers", module + "/dataplane", module + "/cmd"}, []string{module + "/dataplane/authority", module + "/dataplane/prefetch"}},
	{"./internal/store/...", []string{module + "/internal/api", module + "/dataplane", module + "/controllers", module + "/cmd"}, nil},
	// The query log is storage and search: the REST API reads it, so it must
	// not drag the data plane in (internal/dnslog is the adapter between them).
	{"./internal/querylog/...", []string{module + "/dataplane", module + "/internal/api", module + "/controllers", module + "/cmd"}, nil},
}

func TestDependencyDirection(t *testing.T) {
	for _, r := range rules {
		t.Run(r.pkgs, func(t *testing.T) {
			// A guard over a pattern that matches nothing (a package moved
			// or renamed) would pass forever: refuse it.
			if pkgs := goList(t, r.pkgs); len(pkgs) == 0 {
				t.Fatalf("guard pattern %s matches no package", r.pkgs)
			}
			out, err := exec.Command("go", "-C", "../..", "list", "-e", "-deps", "-f", "{{.ImportPath}}", r.pkgs).CombinedOutput()
			if err != nil {
				t.Fatalf("go list %s: %v\n%s", r.pkgs, err, out)
			}
			for _, dep := range strings.Fields(string(out)) {
				if slices.Contains(r.allowed, dep) {
					continue
				}
				for _, f := range r.forbidden {
					if strings.HasPrefix(dep, f) {
						t.Errorf("%s depends on %s (forbidden: %s)", r.pkgs, dep, f)
					}
				}
			}
		})
	}
}

// miekgAllowed are the packages that may import github.com/miekg/dns
// directly: the data plane (it speaks DNS), the zone-file reader and the
// RFC 2136 publisher (a DNS UPDATE client of other servers). Test tools
// under test/ are clients and reference servers. Everything else goes
// through dataplane (TypeString, QueryResult.Sections, probe.Query).
var miekgAllowed = []string{module + "/dataplane", module + "/internal/zonefile", module + "/internal/publish", module + "/test/"}

func TestMiekgDNSConfined(t *testing.T) {
	out, err := exec.Command("go", "-C", "../..", "list", "-e", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !slices.Contains(f[1:], "github.com/miekg/dns") {
			continue
		}
		seen++
		if !slices.ContainsFunc(miekgAllowed, func(p string) bool {
			return f[0] == p || strings.HasPrefix(f[0], p+"/") || strings.HasPrefix(f[0], p) && strings.HasSuffix(p, "/")
		}) {
			t.Errorf("%s imports github.com/miekg/dns: only %v may; use the data plane's helpers", f[0], miekgAllowed)
		}
	}
	if seen == 0 {
		t.Fatal("no package imports github.com/miekg/dns: the guard is looking at the wrong tree")
	}
}

func goList(t *testing.T, pattern string) []string {
	t.Helper()
	out, err := exec.Command("go", "-C", "../..", "list", pattern).Output()
	if err != nil {
		return nil
	}
	return strings.Fields(string(out))
}
