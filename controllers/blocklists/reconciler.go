package blocklists

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/controllers/events"
	"github.com/svcdns/svc/internal/listfetch"
	"github.com/svcdns/svc/internal/store"
)

// Kind is the stored kind this reconciler watches.
const Kind = "BlockList"

// Fetcher is what the reconciler needs of internal/listfetch.Fetcher.
type Fetcher interface {
	Fetch(ctx context.Context, url string) (listfetch.Result, error)
	Open(digest string) (*os.File, error)
	AcquireParse(ctx context.Context) (func(), error)
}

// CompiledSource is a compiled source with its parse counts.
type CompiledSource interface {
	Counts() (entries, invalid, unsupported, excluded, ruleCount int, staleExcludes []string)
}

// Compiler compiles sources and combines them into a list (the node passes
// dataplane/policy.ListCompiler).
type Compiler[S CompiledSource, L any] interface {
	CompileSource(ctx context.Context, src v1alpha1.BlockListSource, body io.Reader) (S, error)
	NewList(bl *v1alpha1.BlockList, sources []S) L
}

// ConfigMaps reads the ConfigMaps of configMapRef sources (Kubernetes store
// only). ListBody returns the list body of one ConfigMap: its data values in
// key order (ConfigMapBody).
type ConfigMaps interface {
	ListBody(ctx context.Context, namespace, name string) (string, error)
}

// ConfigMapBody joins the data values of a ConfigMap in key order, each
// ending in a newline, so every key holds part of one list body.
func ConfigMapBody(data map[string]string) string {
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		v := data[k]
		b.WriteString(v)
		if v != "" && !strings.HasSuffix(v, "\n") {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// ConfigMapNamespace is the namespace a configMapRef source of a list in
// listNamespace reads: the list's own. Another namespace is refused (the
// service reads ConfigMaps with its own cluster-wide credentials, so
// honouring it would let a tenant read any namespace's ConfigMaps through
// a BlockList).
func ConfigMapNamespace(listNamespace string, ref *v1alpha1.ConfigMapRef) (string, error) {
	if ref.Namespace == "" || ref.Namespace == listNamespace {
		return listNamespace, nil
	}
	return "", fmt.Errorf("configMapRef %s/%s: a BlockList reads ConfigMaps of its own namespace only (%s); remove configMapRef.namespace and put the ConfigMap in %s",
		ref.Namespace, ref.Name, listNamespace, listNamespace)
}

// report turns Ready and Degraded into (deduplicated) Events.
func report(ev *events.Reporter, obj *unstructured.Unstructured, conds []metav1.Condition) {
	ready := meta.FindStatusCondition(conds, ConditionReady)
	degraded := meta.FindStatusCondition(conds, ConditionDegraded)
	switch {
	case ready != nil && ready.Status != metav1.ConditionTrue:
		ev.Warn(obj, ready.Reason, ready.Message)
	case degraded != nil && degraded.Status == metav1.ConditionTrue:
		ev.Warn(obj, degraded.Reason, degraded.Message)
	case ready != nil:
		ev.OK(obj, ready.Reason, ready.Message)
	}
}

// Options configure a Reconciler.
type Options[S CompiledSource, L any] struct {
	Store    store.Store
	Fetcher  Fetcher
	Compiler Compiler[S, L]
	// ConfigMaps reads configMapRef sources; nil (sqlite store) reports
	// such sources as errors.
	ConfigMaps ConfigMaps
	// OnList receives a compiled list ("namespace/name"); ok=false means the
	// list was deleted and must leave the snapshot.
	OnList func(name string, list L, ok bool)
	// AllowDegraded is blocking.allowDegraded: serve a cached body when a
	// fetch fails.
	AllowDegraded bool
	// DefaultRefresh is blocking.refreshInterval.
	DefaultRefresh time.Duration
	// OnFetch, when set, hears the outcome of every URL fetch of a list
	// ("namespace/name"): FetchOK, FetchNotModified, FetchDegraded (failed,
	// a cached body is served) or FetchError.
	OnFetch func(list, result string)
	// Events records a Warning Event when the list's Ready or Degraded
	// turns bad (or its reason changes) and a Normal one when it recovers;
	// nil records none (sqlite store, data-plane followers).
	Events *events.Reporter
	Now    func() time.Time
	Logger *slog.Logger
}

type sourceState[S CompiledSource] struct {
	fingerprint string // digest + spec of what was compiled
	compiled    S
	fetch       listfetch.Result
	fetchErr    string
	cmDigest    string // sha256 hex of the last ConfigMap body read
}

// Fetch outcomes passed to Options.OnFetch.
const (
	FetchOK          = "ok"
	FetchNotModified = "not_modified"
	FetchDegraded    = "degraded"
	FetchError       = "error"
)

// Reconciler reconciles BlockList objects. Safe for concurrent use; one
// list is reconciled at a time.
type Reconciler[S CompiledSource, L any] struct {
	o  Options[S, L]
	mu sync.Mutex
	// state per list, per source name.
	state map[string]map[string]*sourceState[S]
}

// New builds a reconciler.
func New[S CompiledSource, L any](o Options[S, L]) *Reconciler[S, L] {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Reconciler[S, L]{o: o, state: map[string]map[string]*sourceState[S]{}}
}

// Reconcile brings one list up to date and returns when it wants to run
// again (the earliest refresh of its URL sources; 0 for none).
func (r *Reconciler[S, L]) Reconcile(ctx context.Context, namespace, name string) (time.Duration, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := namespace + "/" + name
	u, err := r.o.Store.Get(ctx, Kind, namespace, name)
	if errors.Is(err, store.ErrNotFound) {
		delete(r.state, key)
		r.o.Events.Forget(Kind, namespace, name)
		var zero L
		if r.o.OnList != nil {
			r.o.OnList(key, zero, false)
		}
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("get blocklist %s: %w", key, err)
	}
	var bl v1alpha1.BlockList
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &bl); err != nil {
		return 0, fmt.Errorf("decode blocklist %s: %w", key, err)
	}
	now := r.o.Now()
	interval := RefreshInterval(&bl, r.o.DefaultRefresh)
	listOn := enabledByAnnotations(bl.Annotations)
	states := r.state[key]
	if states == nil {
		states = map[string]*sourceState[S]{}
		r.state[key] = states
	}
	var results []SourceResult
	var compiled []S
	next := time.Duration(0)
	seen := map[string]bool{}
	for i, src := range bl.Spec.Sources {
		sname := SourceName(src, i)
		src.Name = sname
		seen[sname] = true
		st := states[sname]
		if st == nil {
			st = &sourceState[S]{}
			states[sname] = st
		}
		res, s, ok := r.gatherSource(ctx, &bl, src, st, listOn, interval, now)
		results = append(results, res)
		if ok {
			compiled = append(compiled, s)
		}
		if src.ConfigMapRef != nil && src.URL == "" && listOn && (src.Enabled == nil || *src.Enabled) && interval > 0 {
			// ConfigMaps are re-read on every reconcile; come back at the
			// refresh interval to pick up edits
			if next == 0 || interval < next {
				next = interval
			}
		}
		if src.URL != "" && listOn && (src.Enabled == nil || *src.Enabled) {
			wait := interval - now.Sub(st.fetch.FetchedAt)
			if st.fetch.FetchedAt.IsZero() || wait <= 0 {
				wait = time.Minute // failed fetch: retry soon
			}
			if next == 0 || wait < next {
				next = wait
			}
		}
	}
	for n := range states {
		if !seen[n] {
			delete(states, n)
		}
	}
	desired := DesiredStatus(&bl, listOn, results, now)
	report(r.o.Events, u, desired.Conditions)
	if StatusChanged(bl.Status, desired) {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&desired)
		if err != nil {
			return next, fmt.Errorf("encode status of %s: %w", key, err)
		}
		u.Object["status"] = m
		if _, err := r.o.Store.UpdateStatus(ctx, u); err != nil {
			return next, fmt.Errorf("update status of %s: %w", key, err)
		}
	}
	if r.o.OnList != nil {
		r.o.OnList(key, r.o.Compiler.NewList(&bl, compiled), true)
	}
	return next, nil
}

func fetchOutcome(fr listfetch.Result, err error, allowDegraded bool) string {
	switch {
	case err == nil && fr.NotModified:
		return FetchNotModified
	case err == nil:
		return FetchOK
	case fr.Degraded && allowDegraded:
		return FetchDegraded
	default:
		return FetchError
	}
}

func enabledByAnnotations(ann map[string]string) bool {
	v, ok := ann[v1alpha1.EnabledAnnotation]
	return !ok || !strings.EqualFold(strings.TrimSpace(v), "false")
}

// gatherSource fetches (when due) and compiles (when the body or the spec
// changed) one source.
func (r *Reconciler[S, L]) gatherSource(ctx context.Context, bl *v1alpha1.BlockList, src v1alpha1.BlockListSource,
	st *sourceState[S], listOn bool, interval time.Duration, now time.Time) (SourceResult, S, bool) {
	var zero S
	res := SourceResult{Name: src.Name}
	enabled := src.Enabled == nil || *src.Enabled
	if src.URL != "" {
		// keep what we know of the body even while switched off
		res.Digest, res.ETag, res.LastFetched = st.fetch.Digest, st.fetch.ETag, st.fetch.FetchedAt
	} else if src.ConfigMapRef != nil {
		res.Digest = st.cmDigest
	}
	if !enabled || !listOn {
		res.Disabled = true
		return res, zero, false
	}
	specJSON, _ := json.Marshal(struct {
		F, X, E any
		S       bool
	}{src.Format, src.Exclude, src.Entries, src.Subdomains})
	var body func() (io.ReadCloser, error)
	var fp string
	switch {
	case src.URL != "":
		if FetchDue(st.fetch.FetchedAt, interval, now) || st.fetch.Digest == "" {
			fr, err := r.o.Fetcher.Fetch(ctx, src.URL)
			if r.o.OnFetch != nil {
				r.o.OnFetch(bl.Namespace+"/"+bl.Name, fetchOutcome(fr, err, r.o.AllowDegraded))
			}
			switch {
			case err == nil:
				// the reconciler's clock decides refreshes, not the fetcher's
				fr.FetchedAt = now
				st.fetch, st.fetchErr = fr, ""
			case fr.Degraded && r.o.AllowDegraded:
				st.fetch, st.fetchErr = fr, err.Error() // serve the cached body
			case r.o.AllowDegraded:
				st.fetchErr = err.Error() // keep what was compiled before, if anything
			default:
				st.fetch, st.fetchErr = listfetch.Result{FetchedAt: st.fetch.FetchedAt}, err.Error()
			}
		}
		res.Digest, res.ETag, res.LastFetched, res.Err = st.fetch.Digest, st.fetch.ETag, st.fetch.FetchedAt, st.fetchErr
		res.Stale = st.fetchErr != "" && st.fetch.Digest != ""
		if st.fetch.Digest == "" {
			if res.Err == "" {
				res.Err = "no body fetched yet"
			}
			return res, zero, false
		}
		digest := st.fetch.Digest
		fp = "url:" + digest + string(specJSON)
		body = func() (io.ReadCloser, error) { return r.o.Fetcher.Open(digest) }
	case src.ConfigMapRef != nil && src.Inline == nil:
		if _, err := ConfigMapNamespace(bl.Namespace, src.ConfigMapRef); err != nil {
			res.Err, res.Reason, res.Digest = err.Error(), ReasonConfigMapNamespace, ""
			st.cmDigest, st.fingerprint = "", ""
			return res, zero, false
		}
		if r.o.ConfigMaps == nil {
			res.Err = "configMapRef sources need the Kubernetes store"
			return res, zero, false
		}
		ns, _ := ConfigMapNamespace(bl.Namespace, src.ConfigMapRef)
		text, err := r.o.ConfigMaps.ListBody(ctx, ns, src.ConfigMapRef.Name)
		if err != nil {
			res.Err = fmt.Sprintf("configMap %s/%s: %v", ns, src.ConfigMapRef.Name, err)
			if r.o.AllowDegraded && st.cmDigest != "" && strings.HasPrefix(st.fingerprint, "configmap:") {
				// keep serving what was compiled from the last body read
				res.Stale, fp = true, st.fingerprint
				break
			}
			st.cmDigest, st.fingerprint = "", ""
			res.Digest = ""
			return res, zero, false
		}
		sum := sha256.Sum256([]byte(text))
		st.cmDigest = hex.EncodeToString(sum[:])
		res.Digest = st.cmDigest
		fp = "configmap:" + st.cmDigest + string(specJSON)
		body = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(text)), nil }
	default:
		text := strings.Join(src.Inline, "\n")
		fp = "inline:" + text + string(specJSON)
		body = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(text)), nil }
	}
	if st.fingerprint != fp {
		s, err := r.compile(ctx, src, body)
		if err != nil {
			res.Err = err.Error()
			return res, zero, false
		}
		st.compiled, st.fingerprint = s, fp
	}
	res.Compiled = true
	res.Entries, res.Invalid, res.Unsupported, res.Excluded, res.RuleCount, res.StaleExcludes = st.compiled.Counts()
	return res, st.compiled, true
}

func (r *Reconciler[S, L]) compile(ctx context.Context, src v1alpha1.BlockListSource, open func() (io.ReadCloser, error)) (S, error) {
	var zero S
	release, err := r.o.Fetcher.AcquireParse(ctx)
	if err != nil {
		return zero, err
	}
	defer release()
	rc, err := open()
	if err != nil {
		return zero, fmt.Errorf("open body: %w", err)
	}
	defer rc.Close()
	s, err := r.o.Compiler.CompileSource(ctx, src, rc)
	if err != nil {
		return zero, fmt.Errorf("compile: %w", err)
	}
	return s, nil
}

// Refresh fetches every url source of one list now, whatever its refresh
// interval (POST /blocklists/{ns}/{name}/refresh), then reconciles it.
func (r *Reconciler[S, L]) Refresh(ctx context.Context, namespace, name string) (time.Duration, error) {
	r.mu.Lock()
	for _, st := range r.state[namespace+"/"+name] {
		st.fetch.FetchedAt = time.Time{}
	}
	r.mu.Unlock()
	return r.Reconcile(ctx, namespace, name)
}
