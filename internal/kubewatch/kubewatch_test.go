package kubewatch

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// refused is a real "connection refused" from a loopback port nobody
// listens on.
func refused(t *testing.T) error {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = http.Get("http://" + addr + "/api")
	if err == nil {
		t.Fatalf("GET %s: want an error, the port is closed", addr)
	}
	return err
}

// dropped is the error of a request whose connection the server closed
// without answering, as an apiserver killed mid-request does.
func dropped(t *testing.T) error {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		c, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			c.Close()
		}
	}))
	defer srv.Close()
	_, err := http.Get(srv.URL)
	if err == nil {
		t.Fatal("a dropped connection gave no error")
	}
	return err
}

func TestUnreachable(t *testing.T) {
	gr := schema.GroupResource{Group: "service.io", Resource: "dnszones"}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", refused(t), true},
		{"connection dropped", dropped(t), true},
		{"dial timeout", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("i/o timeout")}, true},
		{"nil", nil, false},
		{"429 too many requests", apierrors.NewTooManyRequests("slow down", 1), false},
		{"410 gone", apierrors.NewResourceExpired("too old resource version"), false},
		{"503 unavailable", apierrors.NewServiceUnavailable("starting"), false},
		{"403 forbidden", apierrors.NewForbidden(gr, "", errors.New("denied")), false},
		{"context canceled", context.Canceled, false},
	} {
		if got := Unreachable(tc.err); got != tc.want {
			t.Errorf("%s (%v): Unreachable = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

// failing answers its first n lists and watches with err.
type failing struct {
	n     int
	err   error
	calls int
}

func (f *failing) List(metav1.ListOptions) (runtime.Object, error) {
	f.calls++
	if f.calls <= f.n {
		return nil, f.err
	}
	return &metav1.List{}, nil
}

func (f *failing) Watch(metav1.ListOptions) (watch.Interface, error) {
	f.calls++
	if f.calls <= f.n {
		return nil, f.err
	}
	return watch.NewEmptyWatch(), nil
}

var _ cache.ListerWatcher = (*ListWatch)(nil)

func TestRetriesWhileUnreachable(t *testing.T) {
	err := refused(t)
	f := &failing{n: 3, err: err}
	lw := New(f)
	start := time.Now()
	if _, err := lw.ListWithContext(t.Context(), metav1.ListOptions{}); err != nil {
		t.Fatalf("list after 3 refusals: %v", err)
	}
	// three waits: FirstRetry, twice and four times it, each up to a
	// quarter more
	if took, most := time.Since(start), 7*FirstRetry*5/4+time.Second; f.calls != 4 || took > most {
		t.Errorf("list: %d calls in %v, want 4 within %v", f.calls, took, most)
	}
	f.calls = 0
	w, err := lw.WatchWithContext(t.Context(), metav1.ListOptions{})
	if err != nil || f.calls != 4 {
		t.Fatalf("watch after 3 refusals: %v after %d calls", err, f.calls)
	}
	w.Stop()
}

func TestAnswersGoToTheReflector(t *testing.T) {
	f := &failing{n: 1, err: apierrors.NewTooManyRequests("slow down", 1)}
	if _, err := New(f).ListWithContext(t.Context(), metav1.ListOptions{}); !apierrors.IsTooManyRequests(err) || f.calls != 1 {
		t.Errorf("a 429 was retried here: %v after %d calls; the reflector's backoff must see it", err, f.calls)
	}
}

func TestRetriesEndWithTheContext(t *testing.T) {
	f := &failing{n: 1 << 30, err: refused(t)}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := New(f).WatchWithContext(ctx, metav1.ListOptions{})
	if took := time.Since(start); !Unreachable(err) || took > 2*time.Second {
		t.Errorf("watch with the apiserver gone and the context ending after 300 ms: %v after %v", err, took)
	}
}

func TestListsThenWatches(t *testing.T) {
	if !New(&failing{}).IsWatchListSemanticsUnSupported() {
		t.Error("the streaming initial list is on: its retry ignores the context")
	}
}
