package events

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

type rec struct{ got []string }

func (r *rec) Eventf(_, _ runtime.Object, typ, reason, action, note string, args ...any) {
	r.got = append(r.got, typ+" "+reason+" "+action+" "+fmt.Sprintf(note, args...))
}

func obj(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("service.io/v1alpha1")
	u.SetKind("BlockList")
	u.SetNamespace("team")
	u.SetName(name)
	return u
}

func TestReporterDedupes(t *testing.T) {
	r := &rec{}
	d := &Deferred{}
	rep := NewReporter(d, "Reconcile")
	rep.Warn(obj("a"), "SourceFailed", "dropped before Set")
	d.Set(r)
	a, b := obj("a"), obj("b")
	rep.OK(b, "Compiled", "fine from the start")
	rep.Warn(a, "SourceFailed", "url: connection refused")
	rep.Warn(a, "SourceFailed", "url: connection refused") // resync: nothing new
	rep.Warn(a, "SourceFailed", "url: 404")
	rep.OK(a, "Compiled", "3 rules")
	rep.OK(a, "Compiled", "3 rules")
	rep.Forget("BlockList", "team", "a")
	rep.Warn(a, "SourceFailed", "url: 404")
	want := []string{
		"Warning SourceFailed Reconcile url: connection refused",
		"Warning SourceFailed Reconcile url: 404",
		"Normal Compiled Reconcile 3 rules",
		"Warning SourceFailed Reconcile url: 404",
	}
	if fmt.Sprint(r.got) != fmt.Sprint(want) {
		t.Fatalf("events\n got %q\nwant %q", r.got, want)
	}
	var none *Reporter
	none.Warn(a, "X", "y") // nil reporter records nothing
	NewReporter(nil, "x").Warn(a, "X", "y")
}
