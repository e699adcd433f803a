package kube

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/svcdns/svc/internal/store"
)

// The apiserver's refusals become errors the REST API answers with a key,
// a status and a hint, never an unknown error (a bare 500).
func TestMapErrRefusals(t *testing.T) {
	gr := schema.GroupResource{Group: "service.io", Resource: "dnsrecordsets"}
	create := request{verb: "create", resource: "dnsrecordsets", group: "service.io", namespace: "web", name: "x"}
	rbac := apierrors.NewForbidden(gr, "x", errors.New(`User "system:serviceaccount:dns:service-dataplane" cannot create resource "dnsrecordsets" in API group "service.io" in the namespace "web"`))
	webhook := apierrors.NewForbidden(gr, "x", errors.New(`admission webhook "policy.example" denied the request: names must be lower case`))
	throttled := apierrors.NewTooManyRequests("slow down", 7)
	for _, tc := range []struct {
		name      string
		err       error
		req       request
		key       string
		status    int
		inMessage []string
		missing   string
	}{
		{"rbac", rbac, create, "forbidden", http.StatusForbidden,
			[]string{"system:serviceaccount:dns:service-dataplane", "may not create dnsrecordsets.service.io in namespace web"},
			"kubernetes: create dnsrecordsets.service.io in namespace web"},
		{"rbac cluster-scoped status", apierrors.NewForbidden(schema.GroupResource{Group: "service.io", Resource: "dnszones"}, "z",
			errors.New(`User "u" cannot update resource "dnszones/status" in API group "service.io" at the cluster scope`)),
			request{verb: "update", resource: "dnszones/status", group: "service.io"}, "forbidden", http.StatusForbidden,
			[]string{"may not update dnszones.service.io/status cluster-wide"}, "kubernetes: update dnszones.service.io/status cluster-wide"},
		{"rbac secrets", apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "s",
			errors.New(`User "u" cannot create resource "secrets" in API group "" in the namespace "dns"`)),
			request{verb: "create", resource: "secrets", namespace: "dns"}, "forbidden", http.StatusForbidden,
			[]string{"may not create secrets in namespace dns"}, "kubernetes: create secrets in namespace dns"},
		{"admission webhook", webhook, create, "unprocessable", http.StatusUnprocessableEntity, []string{"names must be lower case"}, ""},
		{"unauthorized", apierrors.NewUnauthorized("token expired"), create, "unavailable", http.StatusServiceUnavailable, []string{"rejected the service's credentials"}, ""},
		{"throttled", throttled, create, "rate_limited", http.StatusTooManyRequests, []string{"throttling"}, ""},
		{"unavailable", apierrors.NewServiceUnavailable("etcd down"), create, "unavailable", http.StatusServiceUnavailable, []string{"could not take the write"}, ""},
		{"timeout", apierrors.NewTimeoutError("slow", 1), create, "unavailable", http.StatusServiceUnavailable, nil, ""},
		{"internal", apierrors.NewInternalError(errors.New("boom")), create, "unavailable", http.StatusServiceUnavailable, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var re *RefusedError
			if !errors.As(mapErr(tc.err, tc.req), &re) {
				t.Fatalf("mapErr(%v) is not a RefusedError", tc.err)
			}
			if re.ErrorKey() != tc.key || re.HTTPStatus() != tc.status || re.MissingPermission() != tc.missing {
				t.Fatalf("got key %s status %d missing %q", re.ErrorKey(), re.HTTPStatus(), re.MissingPermission())
			}
			for _, s := range tc.inMessage {
				if !strings.Contains(re.ErrorMessage(), s) {
					t.Fatalf("message %q lacks %q", re.ErrorMessage(), s)
				}
			}
			if re.ErrorHint() == "" {
				t.Fatal("no hint")
			}
			if !errors.Is(re, tc.err) {
				t.Fatal("the apiserver's error is not wrapped")
			}
		})
	}
	var re *RefusedError
	if errors.As(mapErr(throttled, create), &re); re.RetryAfter().Seconds() != 7 {
		t.Fatalf("Retry-After %s, want the apiserver's 7s", re.RetryAfter())
	}
	if errors.As(mapErr(rbac, create), &re); !strings.Contains(re.ErrorHint(), "rbac.yaml") || !strings.Contains(re.ErrorHint(), `"create"`) {
		t.Fatalf("hint %q does not name the verb and the chart's RBAC", re.ErrorHint())
	}
	// The store's own classes are kept.
	for _, tc := range []struct {
		err  error
		want error
	}{
		{apierrors.NewConflict(gr, "x", errors.New("changed")), store.ErrConflict},
		{apierrors.NewAlreadyExists(gr, "x"), store.ErrConflict},
		{apierrors.NewNotFound(gr, "x"), store.ErrNotFound},
		{apierrors.NewInvalid(schema.GroupKind{Group: "service.io", Kind: "DNSRecordSet"}, "x", nil), store.ErrInvalid},
	} {
		if got := mapErr(tc.err, create); !errors.Is(got, tc.want) {
			t.Errorf("mapErr(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
