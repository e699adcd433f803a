// Package objectsdir keeps the store in step with objects declared in files:
// the inline `objects` of the config file (manager `file:<config path>`) and
// every *.yaml, *.yml and *.json file of `objectsDir` (manager `file:<path>`).
// A file is applied all or nothing: every document is checked (ownership,
// defaulting, validation) before any is stored, and a bad file leaves every
// object it stored before untouched. Objects of a file that are no longer in
// it, or whose file is gone, are deleted.
package objectsdir

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/svcdns/svc/internal/manifest"
	"github.com/svcdns/svc/internal/store"
)

// DefaultDebounce is how long the directory must be quiet before a resync.
const DefaultDebounce = 300 * time.Millisecond

// Kinds lists the kinds that may be managed by files; the applier looks for
// objects of these kinds (and any kind found in a file) when pruning.
func Kinds() []string {
	return []string{
		"DNSZone", "DNSRecordSet", "BlockList", "ClientGroup", "Policy", "UnblockRequest",
		"LocalUser", "APIToken", "ServiceAccount", "RoleBinding", "IdentityProvider",
	}
}

// Diagnostic is one problem with a file or inline object, as shown to people.
type Diagnostic struct {
	Severity string `json:"severity"` // error or warning
	Source   string `json:"source"`   // file path (or config path for inline objects)
	Document int    `json:"document,omitempty"`
	Item     int    `json:"item,omitempty"`
	Line     int    `json:"line,omitempty"`
	Field    string `json:"field,omitempty"`
	Object   string `json:"object,omitempty"` // Kind/namespace/name when known
	Message  string `json:"message"`
}

// Applier applies inline objects and the files of one directory.
type Applier struct {
	st       store.Store
	dir      string
	log      *slog.Logger
	Debounce time.Duration // set before Run; DefaultDebounce when zero

	mu      sync.Mutex
	scanned bool
	owned   map[store.Manager]map[store.Key]bool // what each file manager stored
	hashes  map[string][32]byte                  // content last applied per file
	diags   map[string][]Diagnostic              // per source
}

// New returns an Applier for dir (which need not exist yet).
func New(st store.Store, dir string, logger *slog.Logger) *Applier {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Applier{
		st: st, dir: dir, log: logger,
		owned:  map[store.Manager]map[store.Key]bool{},
		hashes: map[string][32]byte{},
		diags:  map[string][]Diagnostic{},
	}
}

// Manager returns the manager of objects from the file or config at path.
func Manager(path string) store.Manager { return store.Manager("file:" + path) }

// Diagnostics returns the current problems, ordered by source.
func (a *Applier) Diagnostics() []Diagnostic {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []Diagnostic
	srcs := make([]string, 0, len(a.diags))
	for s := range a.diags {
		srcs = append(srcs, s)
	}
	sort.Strings(srcs)
	for _, s := range srcs {
		out = append(out, a.diags[s]...)
	}
	return out
}

// ApplyInline applies objs (the `objects` setting of the config file at
// configPath) with manager file:<configPath>, deleting objects that manager
// stored before and objs no longer has. A bad object changes nothing and is
// returned as an error (and kept in Diagnostics).
func (a *Applier) ApplyInline(ctx context.Context, configPath string, objs []map[string]any) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.scan(ctx); err != nil {
		return err
	}
	decoded, err := manifest.FromMaps(configPath, objs)
	return a.syncSource(ctx, configPath, decoded, err)
}

// Run applies the directory, then follows its changes until ctx ends.
func (a *Applier) Run(ctx context.Context) error {
	debounce := a.Debounce
	if debounce <= 0 {
		debounce = DefaultDebounce
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("objectsDir %s: %w", a.dir, err)
	}
	defer w.Close()
	watching := false
	addWatch := func() {
		if watching {
			return
		}
		if err := w.Add(a.dir); err == nil {
			watching = true
		} else if !errors.Is(err, os.ErrNotExist) {
			a.log.Error("objectsDir: cannot watch", "dir", a.dir, "err", err)
		}
	}
	addWatch()
	if err := a.Sync(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, store.ErrClosed) {
		a.log.Error("objectsDir: sync", "dir", a.dir, "err", err)
	}
	// A directory that does not exist yet is looked for now and then.
	poll := time.NewTicker(5 * time.Second)
	defer poll.Stop()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if ev.Name == a.dir && ev.Has(fsnotify.Remove|fsnotify.Rename) {
				watching = false
			}
			// Any change may matter (editors rename, ConfigMap mounts swap
			// symlinks), so the whole directory is compared after a pause.
			timer.Reset(debounce)
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			a.log.Error("objectsDir: watch", "dir", a.dir, "err", err)
			timer.Reset(debounce)
		case <-poll.C:
			if !watching {
				addWatch()
				if watching {
					timer.Reset(debounce)
				}
			}
		case <-timer.C:
			if err := a.Sync(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, store.ErrClosed) {
				a.log.Error("objectsDir: sync", "dir", a.dir, "err", err)
			}
		}
	}
}

// Sync applies every changed file of the directory and deletes the objects of
// files that are gone. Files are independent: one bad file does not stop others.
func (a *Applier) Sync(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.scan(ctx); err != nil {
		return err
	}
	files, err := a.files()
	if err != nil {
		return err
	}
	present := map[string]bool{}
	var failed []string
	changed := false
	for _, f := range files {
		present[f] = true
		ok, applied := a.syncFile(ctx, f)
		if !ok {
			failed = append(failed, f)
		}
		changed = changed || applied
	}
	// Files that are gone: delete what they stored. A zone can only go once
	// the record sets of every removed file are gone, so a zone refused in the
	// first pass (its record sets came from another file) goes in the second.
	prefix := string(Manager(a.dir)) + string(filepath.Separator)
	var removed []store.Manager
	for m := range a.owned {
		if strings.HasPrefix(string(m), prefix) && !present[strings.TrimPrefix(string(m), "file:")] {
			removed = append(removed, m)
		}
	}
	slices.Sort(removed)
	for pass := 0; pass < 2; pass++ {
		for _, m := range removed {
			if _, ok := a.owned[m]; ok {
				a.prune(ctx, strings.TrimPrefix(string(m), "file:"), m, nil)
			}
		}
	}
	for _, m := range removed {
		path := strings.TrimPrefix(string(m), "file:")
		delete(a.hashes, path)
		delete(a.diags, path)
		changed = true
	}
	// An object that moved between files is refused by its new file until the
	// old one let go of it; one more pass settles that.
	if changed {
		for _, f := range failed {
			a.syncFile(ctx, f)
		}
	}
	return nil
}

// files lists the manifest files of the directory, sorted.
func (a *Applier) files() ([]string, error) {
	entries, err := os.ReadDir(a.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("objectsDir %s: %w", a.dir, err)
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue // hidden files and ConfigMap ..data bookkeeping
		}
		switch strings.ToLower(filepath.Ext(name)) {
		case ".yaml", ".yml", ".json":
		default:
			continue
		}
		p := filepath.Join(a.dir, name)
		if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
			continue
		}
		out = append(out, p)
	}
	sort.Strings(out)
	return out, nil
}

// syncFile applies one file when its content changed (or failed before); it
// reports whether the file is now in the store and whether anything was done.
func (a *Applier) syncFile(ctx context.Context, path string) (ok, applied bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		a.setDiags(path, []Diagnostic{{Severity: "error", Source: path, Message: fmt.Sprintf("read: %v", err)}})
		return false, false
	}
	if len(data) > manifest.MaxBytes {
		a.setDiags(path, []Diagnostic{{Severity: "error", Source: path, Message: fmt.Sprintf("larger than %d bytes", manifest.MaxBytes)}})
		return false, false
	}
	sum := sha256.Sum256(data)
	if prev, seen := a.hashes[path]; seen && prev == sum && len(a.diags[path]) == 0 {
		return true, false
	}
	objs, derr := manifest.Decode(path, data)
	if err := a.syncSource(ctx, path, objs, derr); err != nil {
		return false, true
	}
	a.hashes[path] = sum
	return true, true
}

// syncSource checks every object of a source, applies them all when every
// check passed, and deletes the source's objects it no longer declares.
func (a *Applier) syncSource(ctx context.Context, source string, objs []manifest.Object, decodeErr error) error {
	m := Manager(source)
	var diags []Diagnostic
	var merrs manifest.Errors
	if errors.As(decodeErr, &merrs) {
		for _, e := range merrs {
			diags = append(diags, Diagnostic{Severity: "error", Source: source, Document: e.Document, Item: e.Item, Line: e.Line, Field: e.Field, Message: e.Message})
		}
	} else if decodeErr != nil {
		diags = append(diags, Diagnostic{Severity: "error", Source: source, Message: decodeErr.Error()})
	}
	seen := map[store.Key]manifest.Object{}
	for _, o := range objs {
		k := store.KeyOf(o.Unstructured)
		if first, dup := seen[k]; dup {
			diags = append(diags, objDiag(source, o, fmt.Sprintf("declared twice (first in document %d)", first.Document)))
			continue
		}
		seen[k] = o
		// Dry run: ownership, defaulting and validation, nothing stored yet.
		if _, err := a.st.Apply(ctx, o.DeepCopy(), store.ApplyOptions{Manager: m, DryRun: true}); err != nil {
			if errors.Is(err, store.ErrClosed) {
				// The node is stopping: nothing is wrong with the file.
				return err
			}
			diags = append(diags, applyDiag(source, o, err))
		}
	}
	if len(diags) > 0 {
		a.setDiags(source, diags)
		for _, d := range diags {
			a.log.Error("objects not applied: the file is refused as a whole", "source", source, "document", d.Document, "item", d.Item, "line", d.Line, "field", d.Field, "object", d.Object, "err", d.Message)
		}
		return fmt.Errorf("%s: %d problems, nothing applied", source, len(diags))
	}

	var applyDiags []Diagnostic
	keep := map[store.Key]bool{}
	for _, o := range objs {
		k := store.KeyOf(o.Unstructured)
		res, err := a.st.Apply(ctx, o.DeepCopy(), store.ApplyOptions{Manager: m})
		if errors.Is(err, store.ErrClosed) {
			return err
		}
		if err != nil {
			// Checked a moment ago: only a race with another writer gets here.
			applyDiags = append(applyDiags, applyDiag(source, o, err))
			continue
		}
		keep[k] = true
		a.own(m, k)
		if res.Result != store.Unchanged {
			a.log.Info("object applied", "source", source, "object", k.String(), "result", string(res.Result))
		}
	}
	applyDiags = append(applyDiags, a.prune(ctx, source, m, keep)...)
	a.setDiags(source, applyDiags)
	if len(applyDiags) > 0 {
		return fmt.Errorf("%s: %d problems", source, len(applyDiags))
	}
	return nil
}

// prune deletes what manager m stored that keep does not list; record sets go
// before zones so that a zone is empty when its turn comes.
func (a *Applier) prune(ctx context.Context, source string, m store.Manager, keep map[store.Key]bool) []Diagnostic {
	var gone []store.Key
	for k := range a.owned[m] {
		if !keep[k] {
			gone = append(gone, k)
		}
	}
	slices.SortFunc(gone, func(x, y store.Key) int {
		xz, yz := x.Kind == store.KindDNSZone, y.Kind == store.KindDNSZone
		if xz != yz {
			if xz {
				return 1
			}
			return -1
		}
		return strings.Compare(x.String(), y.String())
	})
	var diags []Diagnostic
	for _, k := range gone {
		err := a.st.Delete(ctx, k.Kind, k.Namespace, k.Name, store.DeleteOptions{Manager: m})
		switch {
		case err == nil:
			a.log.Info("object deleted: no longer declared", "source", source, "object", k.String())
		case errors.Is(err, store.ErrNotFound), errors.As(err, new(*store.ManagedByError)), errors.Is(err, store.ErrClosed):
			// Gone already, or someone else owns it now: not ours to delete
			// (or the node is stopping).
		default:
			diags = append(diags, Diagnostic{Severity: "warning", Source: source, Object: k.String(), Message: "not deleted: " + err.Error()})
			a.log.Warn("object not deleted", "source", source, "object", k.String(), "err", err)
			continue
		}
		delete(a.owned[m], k)
	}
	if len(a.owned[m]) == 0 {
		delete(a.owned, m)
	}
	return diags
}

func (a *Applier) own(m store.Manager, k store.Key) {
	if a.owned[m] == nil {
		a.owned[m] = map[store.Key]bool{}
	}
	a.owned[m][k] = true
}

func (a *Applier) setDiags(source string, d []Diagnostic) {
	if len(d) == 0 {
		delete(a.diags, source)
		return
	}
	a.diags[source] = d
}

// scan learns, once, which objects every file manager stored, so that files
// removed while the node was down are pruned too.
func (a *Applier) scan(ctx context.Context) error {
	if a.scanned {
		return nil
	}
	for _, kind := range Kinds() {
		opts := store.ListOptions{Kind: kind, Limit: 500}
		for page := 0; ; page++ {
			if page > 1<<20 {
				return fmt.Errorf("scan %s: too many pages", kind)
			}
			res, err := a.st.List(ctx, opts)
			if err != nil {
				return fmt.Errorf("scan %s: %w", kind, err)
			}
			for _, o := range res.Items {
				if m := store.OwnerOf(o); strings.HasPrefix(string(m), "file:") {
					a.own(m, store.KeyOf(o))
				}
			}
			if res.Continue == "" {
				break
			}
			opts.Continue = res.Continue
		}
	}
	a.scanned = true
	return nil
}

func objDiag(source string, o manifest.Object, msg string) Diagnostic {
	return Diagnostic{Severity: "error", Source: source, Document: o.Document, Item: o.Item, Line: o.Line, Object: store.KeyOf(o.Unstructured).String(), Message: msg}
}

// applyDiag turns a refused apply into a diagnostic, keeping the field the
// validator named.
func applyDiag(source string, o manifest.Object, err error) Diagnostic {
	d := objDiag(source, o, err.Error())
	var mb *store.ManagedByError
	if errors.As(err, &mb) {
		d.Message = fmt.Sprintf("object is managed by %s", mb.Owner)
	}
	d.Field = fieldOf(err)
	return d
}

// fieldOf finds the field path a validation message starts with, e.g.
// "invalid object: spec.zoneRef.name: Required value".
func fieldOf(err error) string {
	if !errors.Is(err, store.ErrInvalid) {
		return ""
	}
	// The schema validator's error carries the failing fields as causes.
	var se *apierrors.StatusError
	if errors.As(err, &se) && se.ErrStatus.Details != nil {
		for _, c := range se.ErrStatus.Details.Causes {
			if c.Field != "" {
				return c.Field
			}
		}
	}
	msg := err.Error()
	i := strings.Index(msg, store.ErrInvalid.Error()+": ")
	if i < 0 {
		return ""
	}
	rest := msg[i+len(store.ErrInvalid.Error())+2:]
	j := strings.Index(rest, ": ")
	if j <= 0 {
		return ""
	}
	f := rest[:j]
	if strings.ContainsAny(f, " ,") {
		return ""
	}
	return f
}
