package objectsdir_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svcdns/svc/internal/objectsdir"
	"github.com/svcdns/svc/internal/store"
	"github.com/svcdns/svc/internal/store/sqlite"
	"github.com/svcdns/svc/internal/store/storetest"
)

func newStore(t *testing.T, path string) store.Store {
	t.Helper()
	s, err := sqlite.NewStore(t.Context(), path, storetest.SchemaLite{}, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

const zoneDoc = `apiVersion: service.io/v1alpha1
kind: DNSZone
metadata:
  name: %s
`

const rsDoc = `apiVersion: service.io/v1alpha1
kind: DNSRecordSet
metadata:
  name: %s
  namespace: default
spec:
  zoneRef: {name: %s}
  endpoints:
  - {dnsName: %s.%s, recordType: A, targets: [%q]}
`

func zone(name string) string { return fmt.Sprintf(zoneDoc, name) }
func rs(name, z, target string) string {
	return fmt.Sprintf(rsDoc, name, z, name, z, target)
}

func docs(ds ...string) string { return strings.Join(ds, "---\n") }

func exists(t *testing.T, s store.Store, kind, ns, name string) bool {
	t.Helper()
	_, err := s.Get(t.Context(), kind, ns, name)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

func target(t *testing.T, s store.Store, name string) string {
	t.Helper()
	o, err := s.Get(t.Context(), store.KindDNSRecordSet, "default", name)
	if err != nil {
		t.Fatal(err)
	}
	eps := o.Object["spec"].(map[string]any)["endpoints"].([]any)
	return eps[0].(map[string]any)["targets"].([]any)[0].(string)
}

func TestSyncAppliesPrunesAndRefusesBadFiles(t *testing.T) {
	ctx := t.Context()
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "objects.d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := newStore(t, filepath.Join(tmp, "state.db"))
	a := objectsdir.New(s, dir, nil)
	zones := filepath.Join(dir, "zones.yaml")
	records := filepath.Join(dir, "records.yml")
	write(t, zones, docs(zone("example.com"), zone("example.org")))
	write(t, records, docs(rs("www", "example.com", "192.0.2.1"), rs("mail", "example.com", "192.0.2.2")))
	write(t, filepath.Join(dir, "notes.txt"), "not a manifest")

	if err := a.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if d := a.Diagnostics(); len(d) != 0 {
		t.Fatalf("diagnostics after a good sync: %+v", d)
	}
	z, err := s.Get(ctx, store.KindDNSZone, "", "example.com")
	if err != nil {
		t.Fatal(err)
	}
	if got := store.OwnerOf(z); got != store.Manager("file:"+zones) {
		t.Fatalf("manager %q, want file:%s", got, zones)
	}

	// A bad file: one good change and one invalid document. Nothing changes.
	write(t, records, docs(rs("www", "example.com", "192.0.2.99"), `apiVersion: service.io/v1alpha1
kind: DNSRecordSet
metadata: {name: broken, namespace: default}
spec:
  endpoints: []
`))
	if err := a.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := target(t, s, "www"); got != "192.0.2.1" {
		t.Fatalf("www target %s after a refused file, want 192.0.2.1 untouched", got)
	}
	if !exists(t, s, store.KindDNSRecordSet, "default", "mail") {
		t.Fatal("mail was deleted although its file was refused")
	}
	diags := a.Diagnostics()
	if len(diags) != 1 || diags[0].Source != records || diags[0].Document != 2 || diags[0].Field != "spec.zoneRef.name" || diags[0].Severity != "error" {
		t.Fatalf("diagnostics %+v, want one error naming %s document 2 field spec.zoneRef.name", diags, records)
	}

	// Malformed YAML is reported with its line.
	write(t, records, "apiVersion: [\n")
	if err := a.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if d := a.Diagnostics(); len(d) != 1 || d[0].Line == 0 || !strings.Contains(d[0].Message, "malformed YAML") {
		t.Fatalf("diagnostics %+v, want malformed YAML with a line", d)
	}

	// Fixed, minus one document: mail is deleted, www updated.
	write(t, records, rs("www", "example.com", "192.0.2.3"))
	if err := a.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if d := a.Diagnostics(); len(d) != 0 {
		t.Fatalf("diagnostics after the fix: %+v", d)
	}
	if got := target(t, s, "www"); got != "192.0.2.3" {
		t.Fatalf("www target %s, want 192.0.2.3", got)
	}
	if exists(t, s, store.KindDNSRecordSet, "default", "mail") {
		t.Fatal("mail survived its document's removal")
	}

	// Both files deleted: record sets go before their zone, all are deleted.
	os.Remove(records)
	os.Remove(zones)
	if err := a.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	for _, k := range []store.Key{{Kind: store.KindDNSZone, Name: "example.com"}, {Kind: store.KindDNSZone, Name: "example.org"}, {Kind: store.KindDNSRecordSet, Namespace: "default", Name: "www"}} {
		if exists(t, s, k.Kind, k.Namespace, k.Name) {
			t.Fatalf("%s survived its file's removal", k)
		}
	}
}

func TestFileCannotTakeOverForeignObject(t *testing.T) {
	ctx := t.Context()
	tmp := t.TempDir()
	s := newStore(t, filepath.Join(tmp, "state.db"))
	if _, err := s.Apply(ctx, storetest.Zone("api.example", ""), store.ApplyOptions{Manager: store.ManagerAPI}); err != nil {
		t.Fatal(err)
	}
	a := objectsdir.New(s, tmp, nil)
	f := filepath.Join(tmp, "z.json")
	write(t, f, `[{"apiVersion":"service.io/v1alpha1","kind":"DNSZone","metadata":{"name":"mine.example"}},
{"apiVersion":"service.io/v1alpha1","kind":"DNSZone","metadata":{"name":"api.example"}}]`)
	if err := a.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if exists(t, s, store.KindDNSZone, "", "mine.example") {
		t.Fatal("a file with a refused object was partly applied")
	}
	d := a.Diagnostics()
	if len(d) != 1 || d[0].Item != 2 || d[0].Object != "DNSZone/api.example" || !strings.Contains(d[0].Message, "managed by api") {
		t.Fatalf("diagnostics %+v, want item 2 managed by api", d)
	}
}

func TestRestartPrunesFilesRemovedWhileDown(t *testing.T) {
	ctx := t.Context()
	tmp := t.TempDir()
	s := newStore(t, filepath.Join(tmp, "state.db"))
	f := filepath.Join(tmp, "z.yaml")
	write(t, f, zone("old.example"))
	if err := objectsdir.New(s, tmp, nil).Sync(ctx); err != nil {
		t.Fatal(err)
	}
	os.Remove(f)
	// A new applier (the node restarted) learns ownership from the store.
	if err := objectsdir.New(s, tmp, nil).Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if exists(t, s, store.KindDNSZone, "", "old.example") {
		t.Fatal("object of a file removed while down survived")
	}
}

func TestRunFollowsDirectory(t *testing.T) {
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "objects.d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := newStore(t, filepath.Join(tmp, "state.db"))
	a := objectsdir.New(s, dir, nil)
	a.Debounce = 20 * time.Millisecond
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	f := filepath.Join(dir, "a.yaml")
	write(t, f, docs(zone("run.example"), zone("two.example")))
	waitFor("zones applied", func() bool {
		return exists(t, s, store.KindDNSZone, "", "run.example") && exists(t, s, store.KindDNSZone, "", "two.example")
	})
	// An editor's atomic save: write a temp file, rename over.
	tmpf := filepath.Join(dir, ".a.yaml.swp")
	write(t, tmpf, zone("run.example"))
	if err := os.Rename(tmpf, f); err != nil {
		t.Fatal(err)
	}
	waitFor("removed document deleted", func() bool { return !exists(t, s, store.KindDNSZone, "", "two.example") })
	if !exists(t, s, store.KindDNSZone, "", "run.example") {
		t.Fatal("kept document deleted")
	}
	os.Remove(f)
	waitFor("deleted file's objects deleted", func() bool { return !exists(t, s, store.KindDNSZone, "", "run.example") })
}

func TestApplyInline(t *testing.T) {
	ctx := t.Context()
	tmp := t.TempDir()
	s := newStore(t, filepath.Join(tmp, "state.db"))
	a := objectsdir.New(s, filepath.Join(tmp, "none"), nil)
	cfg := "/etc/service/service.yaml"
	z := func(name string) map[string]any {
		return map[string]any{"apiVersion": "service.io/v1alpha1", "kind": "DNSZone", "metadata": map[string]any{"name": name}, "spec": map[string]any{"defaultTTL": 60}}
	}
	if err := a.ApplyInline(ctx, cfg, []map[string]any{z("a.example"), z("b.example")}); err != nil {
		t.Fatal(err)
	}
	o, err := s.Get(ctx, store.KindDNSZone, "", "a.example")
	if err != nil || store.OwnerOf(o) != objectsdir.Manager(cfg) {
		t.Fatalf("inline object: %v manager %q", err, store.OwnerOf(o))
	}
	bad := z("c.example")
	delete(bad, "kind")
	if err := a.ApplyInline(ctx, cfg, []map[string]any{z("a.example"), bad}); err == nil {
		t.Fatal("bad inline objects accepted")
	}
	if !exists(t, s, store.KindDNSZone, "", "b.example") {
		t.Fatal("a refused inline apply deleted b.example")
	}
	if d := a.Diagnostics(); len(d) != 1 || d[0].Source != cfg || d[0].Item != 2 || d[0].Field != "kind" {
		t.Fatalf("diagnostics %+v, want item 2 field kind", d)
	}
	if err := a.ApplyInline(ctx, cfg, []map[string]any{z("a.example")}); err != nil {
		t.Fatal(err)
	}
	if exists(t, s, store.KindDNSZone, "", "b.example") {
		t.Fatal("b.example survived its removal from objects")
	}
	if len(a.Diagnostics()) != 0 {
		t.Fatal("diagnostics kept after a good apply")
	}
}

// TestClosedStoreIsNotTheFilesFault: a node that stops while its objects
// are being applied closes the store under the applier; the file is fine,
// so it gets no diagnostics and no error in the log (a refused start
// logged two "file refused as a whole" errors for a valid zone file).
func TestClosedStoreIsNotTheFilesFault(t *testing.T) {
	tmp := t.TempDir()
	s := newStore(t, filepath.Join(tmp, "state.db"))
	f := filepath.Join(tmp, "z.yaml")
	write(t, f, zone("fine.example"))
	var logs strings.Builder
	a := objectsdir.New(s, tmp, slog.New(slog.NewTextHandler(&logs, nil)))
	if err := a.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	// the file changes and the node stops before it is applied
	write(t, f, docs(zone("fine.example"), zone("also-fine.example")))
	s.Close()
	if err := a.Sync(t.Context()); err != nil {
		t.Logf("Sync on a closed store: %v", err)
	}
	if d := a.Diagnostics(); len(d) > 0 {
		t.Errorf("a closed store left diagnostics on a valid file: %+v", d)
	}
	if strings.Contains(logs.String(), "level=ERROR") || strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("a closed store was logged as the file's problem:\n%s", logs.String())
	}
}
