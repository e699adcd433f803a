package sqlitedb

import (
	"os/exec"
	"strings"
	"testing"
)

// Only this package imports the SQLite driver, so every database file is
// opened through Open and its one connection-string dialect (test files may
// open files directly to build fixtures).
func TestOnlyOpenerImportsDriver(t *testing.T) {
	out, err := exec.Command("go", "-C", "../..", "list", "-e", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	const self = "github.com/svcdns/svc/internal/sqlitedb"
	seen := false
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		for _, imp := range f[1:] {
			if imp != "modernc.org/sqlite" && !strings.HasPrefix(imp, "modernc.org/sqlite/") {
				continue
			}
			if f[0] == self {
				seen = true
				continue
			}
			t.Errorf("%s imports %s: open SQLite files through %s instead", f[0], imp, self)
		}
	}
	if !seen {
		t.Fatalf("%s does not import modernc.org/sqlite: the guard checks nothing", self)
	}
}
