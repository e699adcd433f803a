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
	// served, never from a second rule set.
	{"./controllers/...", []string{module + "/dataplane", module + "/internal/api", module + "/cmd"}, []string{module + "/dataplane/authority"}},
	{"./internal/api/...", []string{module + "/controllers", module + "/dataplane", module + "/cmd"}, []string{module + "/dataplane/authority"}},
	{"./internal/store/...", []string{module + "/internal/api", module + "/dataplane", module + "/controllers", module + "/cmd"}, nil},
}

func TestDependencyDirection(t *testing.T) {
	for _, r := range rules {
		t.Run(r.pkgs, func(t *testing.T) {
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
