package api

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/svcdns/svc/internal/store"
)

// A write through the API returns once this node's data plane answers with
// it: the README's `svc records add` followed by `svc query` must see the
// record. The wait is bounded (Options.WriteVisibleTimeout) and never turns
// a stored write into an error; the answer says whether the wait succeeded.
const (
	// HeaderRevision carries the store revision of the snapshot this node
	// serves when the answer was written.
	HeaderRevision = "X-Service-Revision"
	// HeaderVisible is "true" when this node answers with the request's
	// writes, "false" when the wait ran out (the write is stored all the same).
	HeaderVisible = "X-Service-Visible"
	// HeaderWait lets one request choose its wait: a duration such as 5s, or
	// 0 for none (capped at MaxWriteVisibleTimeout).
	HeaderWait = "X-Service-Wait"

	DefaultWriteVisibleTimeout = 2 * time.Second
	MaxWriteVisibleTimeout     = 30 * time.Second
)

// StoreWrite is one change a request made that may change DNS answers.
type StoreWrite struct {
	Kind, Namespace, Name string
	// ResourceVersion and Generation are what the store returned.
	ResourceVersion string
	Generation      int64
	Deleted         bool
	// Settings marks a settings change (the other fields are empty).
	Settings bool
}

// Visibility waits until this node's data plane serves writes.
type Visibility interface {
	// WaitVisible returns once the snapshot this node serves includes every
	// write, or when ctx ends. It returns the revision of the snapshot being
	// served and whether every write is in it.
	WaitVisible(ctx context.Context, writes []StoreWrite) (revision string, visible bool)
}

// writeLog collects a request's writes (safe for handlers that write from
// several goroutines).
type writeLog struct {
	mu     sync.Mutex
	writes []StoreWrite
}

func (l *writeLog) add(w StoreWrite) {
	l.mu.Lock()
	l.writes = append(l.writes, w)
	l.mu.Unlock()
}

func (l *writeLog) take() []StoreWrite {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]StoreWrite(nil), l.writes...)
}

type writeLogKey struct{}

// noteWrite records a write on the request in ctx (nothing outside a request).
func noteWrite(ctx context.Context, w StoreWrite) {
	if l, ok := ctx.Value(writeLogKey{}).(*writeLog); ok {
		l.add(w)
	}
}

// visibleStore records every object write on the request that made it.
type visibleStore struct{ store.Store }

func (s visibleStore) Apply(ctx context.Context, obj *unstructured.Unstructured, opts store.ApplyOptions) (store.ApplyResult, error) {
	res, err := s.Store.Apply(ctx, obj, opts)
	if err == nil && !opts.DryRun {
		w := StoreWrite{Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName(), ResourceVersion: res.ResourceVersion}
		if res.Object != nil {
			w.Kind, w.Namespace, w.Name, w.Generation = res.Object.GetKind(), res.Object.GetNamespace(), res.Object.GetName(), res.Object.GetGeneration()
		}
		noteWrite(ctx, w)
	}
	return res, err
}

func (s visibleStore) Delete(ctx context.Context, kind, namespace, name string, opts store.DeleteOptions) error {
	err := s.Store.Delete(ctx, kind, namespace, name, opts)
	if err == nil {
		noteWrite(ctx, StoreWrite{Kind: kind, Namespace: namespace, Name: name, Deleted: true})
	}
	return err
}

func (s visibleStore) ApplyBatch(ctx context.Context, objs []*unstructured.Unstructured, dels []store.Key, opts store.ApplyOptions) ([]store.ApplyResult, error) {
	res, err := s.Store.ApplyBatch(ctx, objs, dels, opts)
	if err == nil && !opts.DryRun {
		for i, r := range res {
			if r.Result == store.Unchanged {
				// Nothing new to serve; its stored version may be a status
				// write's, which no snapshot build waits for.
				continue
			}
			w := StoreWrite{Kind: objs[i].GetKind(), Namespace: objs[i].GetNamespace(), Name: objs[i].GetName(), ResourceVersion: r.ResourceVersion}
			if r.Object != nil {
				w.Generation = r.Object.GetGeneration()
			}
			noteWrite(ctx, w)
		}
		for _, k := range dels {
			noteWrite(ctx, StoreWrite{Kind: k.Kind, Namespace: k.Namespace, Name: k.Name, Deleted: true})
		}
	}
	return res, err
}

func (s visibleStore) DeleteZone(ctx context.Context, name string, opts store.DeleteZoneOptions) (store.DeleteZoneResult, error) {
	res, err := s.Store.DeleteZone(ctx, name, opts)
	if err == nil && !opts.DryRun {
		// The zone's record sets go with it; a zone no longer served is
		// what answers change by.
		noteWrite(ctx, StoreWrite{Kind: store.KindDNSZone, Name: name, Deleted: true})
	}
	return res, err
}

// visibleSettings records settings changes on the request that made them.
type visibleSettings struct{ SettingsService }

func (s visibleSettings) PatchCluster(ctx context.Context, patch []byte) error {
	err := s.SettingsService.PatchCluster(ctx, patch)
	if err == nil {
		noteWrite(ctx, StoreWrite{Settings: true})
	}
	return err
}

func (s visibleSettings) PatchNode(ctx context.Context, patch []byte) error {
	err := s.SettingsService.PatchNode(ctx, patch)
	if err == nil {
		noteWrite(ctx, StoreWrite{Settings: true})
	}
	return err
}

// consistency holds the answer of an unsafe request until this node's data
// plane serves the writes the request made. The wait runs when the handler
// starts its answer (all its writes are done by then), so nothing is
// buffered and streaming answers keep streaming.
func (s *Server) consistency(h http.Handler) http.Handler {
	if s.deps.Visibility == nil || s.opts.WriteVisibleTimeout < 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !unsafeMethod(r.Method) {
			h.ServeHTTP(w, r)
			return
		}
		timeout := s.opts.WriteVisibleTimeout
		if v := r.Header.Get(HeaderWait); v != "" {
			d, err := parseWait(v)
			if err != nil {
				writeError(w, r, newErr(http.StatusBadRequest, KeyInvalid, fmt.Sprintf("header %s: %v", HeaderWait, err),
					"give a duration such as 2s or 500ms, or 0 not to wait"))
				return
			}
			timeout = d
		}
		log := &writeLog{}
		r = r.WithContext(context.WithValue(r.Context(), writeLogKey{}, log))
		vw := &visibleWriter{ResponseWriter: w, wait: func() {
			writes := log.take()
			if len(writes) == 0 {
				return
			}
			ctx, cancel := context.WithTimeout(r.Context(), timeout)
			defer cancel()
			start := time.Now()
			rev, ok := s.deps.Visibility.WaitVisible(ctx, writes)
			hd := w.Header()
			if rev != "" {
				hd.Set(HeaderRevision, rev)
			}
			hd.Set(HeaderVisible, strconv.FormatBool(ok))
			if !ok {
				hd.Add("Warning", fmt.Sprintf(`299 - "stored, but this node does not answer with it yet (waited %s); it will shortly"`,
					time.Since(start).Round(time.Millisecond)))
			}
		}}
		h.ServeHTTP(vw, r)
		vw.start()
	})
}

// parseWait reads the X-Service-Wait header.
func parseWait(v string) (time.Duration, error) {
	if v == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration", v)
	}
	if d < 0 {
		return 0, fmt.Errorf("%q is negative", v)
	}
	return min(d, MaxWriteVisibleTimeout), nil
}

// visibleWriter runs wait once, before the first byte of the answer.
type visibleWriter struct {
	http.ResponseWriter
	wait    func()
	started bool
}

func (w *visibleWriter) start() {
	if !w.started {
		w.started = true
		w.wait()
	}
}

func (w *visibleWriter) WriteHeader(code int) {
	if code < 400 {
		w.start()
	}
	w.started = true
	w.ResponseWriter.WriteHeader(code)
}

func (w *visibleWriter) Write(b []byte) (int, error) {
	w.start()
	return w.ResponseWriter.Write(b)
}

func (w *visibleWriter) Flush() {
	w.start()
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *visibleWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
