package validation

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "regenerate the checked-in deepcopy functions and CRDs instead of comparing")

// TestGeneratedFilesUpToDate runs controller-gen (the version the Makefile pins)
// into a temp dir and fails when the checked-in deepcopy functions, CRDs or
// internal schemas differ from what the kubebuilder markers produce.
func TestGeneratedFilesUpToDate(t *testing.T) {
	if testing.Short() {
		t.Skip("runs controller-gen")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go tool on PATH")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GOFLAGS=")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	run("hack/gen-internal-schemas.sh", filepath.Join(tmp, "crd"))
	gen := []string{"go", "run", "sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0", "object"}
	run(append(gen, "paths=./api/v1alpha1", "output:object:dir="+filepath.Join(tmp, "v1alpha1"))...)
	run(append(gen, "paths=./api/v1alpha1/iam", "output:object:dir="+filepath.Join(tmp, "iam"))...)

	pairs := map[string]string{ // generated -> checked in
		filepath.Join(tmp, "v1alpha1", "zz_generated.deepcopy.go"): "api/v1alpha1/zz_generated.deepcopy.go",
		filepath.Join(tmp, "iam", "zz_generated.deepcopy.go"):      "api/v1alpha1/iam/zz_generated.deepcopy.go",
	}
	for _, dir := range []string{"bases", "internal"} {
		gotFiles, _ := filepath.Glob(filepath.Join(tmp, "crd", dir, "*.yaml"))
		haveFiles, _ := filepath.Glob(filepath.Join(root, "config/crd", dir, "*.yaml"))
		if len(gotFiles) != len(haveFiles) && !*update {
			t.Errorf("config/crd/%s has %d files, controller-gen writes %d", dir, len(haveFiles), len(gotFiles))
		}
		for _, f := range gotFiles {
			pairs[f] = filepath.Join("config/crd", dir, filepath.Base(f))
		}
	}
	for gen, have := range pairs {
		want, err := os.ReadFile(gen)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(root, have))
		if *update {
			if err := os.WriteFile(filepath.Join(root, have), want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s is out of date: run hack/gen-internal-schemas.sh and make generate (or go test -run TestGeneratedFilesUpToDate -update)", have)
		}
	}
}
