package kubeenv

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Kubeconfig writes a kubeconfig for cfg's credentials into a temp dir of
// t, optionally pointing at another host (a cutting proxy), and returns its
// path.
func Kubeconfig(t testing.TB, cfg *rest.Config, host string) string {
	t.Helper()
	if host == "" {
		host = cfg.Host
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "user"}
	kc.CurrentContext = "envtest"
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// Apply server-side applies YAML documents as `kubectl apply --server-side`
// would (field manager kubectl).
func Apply(t testing.TB, c client.Client, docs string) {
	t.Helper()
	dec := yaml.NewYAMLOrJSONDecoder(strings.NewReader(docs), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err == io.EOF {
			return
		} else if err != nil {
			t.Fatal(err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := c.Patch(t.Context(), u, client.Apply, client.FieldOwner("kubectl"), client.ForceOwnership); err != nil {
			t.Fatalf("apply %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}

// AccessReview asks the apiserver whether the spec's subject may do what
// it names and, when the answer differs from want, asks again for up to
// 10 s: the RBAC authorizer reads Roles and bindings from an informer, so
// a grant applied a moment ago may not be seen yet (CI runs under load
// answered "not allowed" for a RoleBinding created 50 ms earlier, and
// refused the edge's ServiceAccount the list its RoleBinding grants).
// Grants in these tests only ever grow, so a wrong "allowed" never turns
// right by waiting. Tests that act as a ServiceAccount right after
// applying its RBAC wait here first, as a Deployment's restarts would.
func AccessReview(ctx context.Context, t testing.TB, cs kubernetes.Interface, spec authorizationv1.SubjectAccessReviewSpec, want bool) bool {
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
