// Package events reports reconciler outcomes as Kubernetes Events without
// flooding: a Warning when an object's problem appears or changes, a Normal
// when it recovers, nothing on a resync that finds the same state. The
// recorder is the operator's (controller-runtime's events.k8s.io recorder);
// without one (the sqlite store) reporting does nothing.
package events

import (
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
)

// Recorder is what the reporter needs of controller-runtime's
// recorder.EventRecorder.
type Recorder interface {
	Eventf(regarding runtime.Object, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// Event types.
const (
	Normal  = "Normal"
	Warning = "Warning"
)

// maxNote bounds an Event's note (the apiserver refuses more than 1 kB).
const maxNote = 1000

// Deferred is a Recorder set after the reconcilers that use it are built
// (the operator that owns the real one is built from them). Events before
// Set are dropped.
type Deferred struct {
	mu  sync.RWMutex
	rec Recorder
}

// Set installs the real recorder.
func (d *Deferred) Set(r Recorder) {
	d.mu.Lock()
	d.rec = r
	d.mu.Unlock()
}

// Eventf implements Recorder.
func (d *Deferred) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	d.mu.RLock()
	r := d.rec
	d.mu.RUnlock()
	if r != nil {
		r.Eventf(regarding, related, eventtype, reason, action, note, args...)
	}
}

// Reporter dedupes Events per object by type, reason and message. Safe for
// concurrent use; the zero value and a nil *Reporter record nothing.
type Reporter struct {
	rec    Recorder
	action string
	mu     sync.Mutex
	last   map[string]string // object key -> type/reason/message last recorded
}

// NewReporter returns a reporter recording through rec (nil: nothing) with
// the action of every Event (e.g. "Reconcile", "Fetch").
func NewReporter(rec Recorder, action string) *Reporter {
	return &Reporter{rec: rec, action: action, last: map[string]string{}}
}

// Warn records a Warning unless the same reason and message was the last
// thing recorded for obj.
func (r *Reporter) Warn(obj runtime.Object, reason, message string) {
	r.record(obj, Warning, reason, message)
}

// OK records a Normal Event when obj recovers from a Warning recorded
// earlier; an object that was never in trouble gets none.
func (r *Reporter) OK(obj runtime.Object, reason, message string) {
	if r == nil || r.rec == nil {
		return
	}
	k := objectKey(obj)
	r.mu.Lock()
	prev, seen := r.last[k]
	r.last[k] = Normal
	r.mu.Unlock()
	if seen && prev != Normal {
		r.rec.Eventf(obj, nil, Normal, reason, r.action, "%s", clip(message))
	}
}

// Normal records a Normal Event as it is: for transitions the caller
// detects itself (a condition that changed in stored status), which a
// restart does not repeat.
func (r *Reporter) Normal(obj runtime.Object, reason, message string) {
	if r == nil || r.rec == nil {
		return
	}
	r.rec.Eventf(obj, nil, Normal, reason, r.action, "%s", clip(message))
}

// Forget drops what was recorded for a deleted object.
func (r *Reporter) Forget(kind, namespace, name string) {
	if r == nil || r.rec == nil {
		return
	}
	r.mu.Lock()
	delete(r.last, kind+"/"+namespace+"/"+name)
	r.mu.Unlock()
}

func (r *Reporter) record(obj runtime.Object, typ, reason, message string) {
	if r == nil || r.rec == nil {
		return
	}
	k, v := objectKey(obj), typ+"\x00"+reason+"\x00"+message
	r.mu.Lock()
	same := r.last[k] == v
	r.last[k] = v
	r.mu.Unlock()
	if !same {
		r.rec.Eventf(obj, nil, typ, reason, r.action, "%s", clip(message))
	}
}

func objectKey(obj runtime.Object) string {
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	m, err := meta.Accessor(obj)
	if err != nil {
		return kind
	}
	return kind + "/" + m.GetNamespace() + "/" + m.GetName()
}

func clip(s string) string {
	if len(s) <= maxNote {
		return s
	}
	return s[:maxNote-3] + "..."
}
