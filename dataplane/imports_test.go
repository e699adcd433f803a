package dataplane

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImports guards the dependency direction: the data plane never sees
// the store, controllers, the REST API, huma or controller-runtime.
func TestImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, bad := range []string{"github.com/svcdns/svc/internal/", "github.com/svcdns/svc/controllers", "github.com/danielgtaylor/huma", "sigs.k8s.io/controller-runtime"} {
			if strings.HasPrefix(dep, bad) {
				t.Errorf("dataplane imports %s", dep)
			}
		}
	}
}
