package cli

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/cli.md")

func TestDocs(t *testing.T) {
	var b bytes.Buffer
	if err := GenerateDocs(&b); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "..", "docs", "cli.md")
	if *update {
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/cli -run TestDocs -update)", err)
	}
	if !bytes.Equal(want, b.Bytes()) {
		t.Fatal("docs/cli.md drifted from the command tree; run go test ./internal/cli -run TestDocs -update")
	}
}
