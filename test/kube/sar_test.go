package kube_test

import (
	"context"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// accessReview asks the apiserver whether the spec's subject may do what it
// names and, when the answer differs from want, asks again for up to 10 s:
// the RBAC authorizer reads Roles and bindings from an informer, so a grant
// applied a moment ago may not be seen yet (a CI run under load answered
// "not allowed" for a RoleBinding created 50 ms earlier). Grants in these
// tests only ever grow, so a wrong "allowed" never turns right by waiting.
func accessReview(ctx context.Context, t *testing.T, cs kubernetes.Interface, spec authorizationv1.SubjectAccessReviewSpec, want bool) bool {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		sar, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed == want || !time.Now().Before(deadline) {
			return sar.Status.Allowed
		}
		select {
		case <-ctx.Done():
			return sar.Status.Allowed
		case <-time.After(100 * time.Millisecond):
		}
	}
}
