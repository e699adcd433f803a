package atomicfile_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/svcdns/svc/internal/atomicfile"
)

// TestWriteReplacesWithPermAndLeavesNoTemp: the new content and mode are
// in place and no temporary file is left beside it.
func TestWriteReplacesWithPermAndLeavesNoTemp(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "key")
	if err := os.WriteFile(p, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.Write(p, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil || string(b) != "new" {
		t.Fatalf("content %q, %v; want new", b, err)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("directory holds %d entries, want only the file", len(ents))
	}
	if err := atomicfile.Write(filepath.Join(dir, "missing", "x"), nil, 0o600); err == nil {
		t.Error("a missing directory was not reported")
	}
}
