package kubeauth_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/svcdns/svc/internal/kubeauth"
	"github.com/svcdns/svc/test/kube/kubeenv"
)

var (
	env  *kubeenv.Env
	skip string
)

func TestMain(m *testing.M) {
	if skip = kubeenv.SkipReason(); skip != "" {
		os.Exit(m.Run())
	}
	var err error
	if env, err = kubeenv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop envtest:", err)
	}
	os.Exit(code)
}

func needEnv(t *testing.T) kubernetes.Interface {
	t.Helper()
	if skip != "" {
		t.Skip(skip)
	}
	return kubernetes.NewForConfigOrDie(env.Config)
}

var setupOnce sync.Once

// serviceAccount creates team/bot once and mints a token for audiences.
func serviceAccount(t *testing.T, cs kubernetes.Interface, audiences ...string) string {
	t.Helper()
	ctx := t.Context()
	setupOnce.Do(func() {
		if err := env.Namespaces(ctx, "team"); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CoreV1().ServiceAccounts("team").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "bot"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	tr, err := cs.CoreV1().ServiceAccounts("team").CreateToken(ctx, "bot", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: audiences},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

func TestVerifyJWKS(t *testing.T) {
	cs := needEnv(t)
	ctx := t.Context()
	good := serviceAccount(t, cs, kubeauth.Audience)
	other := serviceAccount(t, cs, "someone-else")
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }

	v, err := kubeauth.NewVerifier(env.Config, kubeauth.VerifierOptions{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	if iss := v.Issuer(ctx); iss == "" {
		t.Fatal("discovery through the apiserver failed")
	}
	id, err := v.Verify(ctx, good)
	if err != nil {
		t.Fatal(err)
	}
	if id.Username != "system:serviceaccount:team:bot" || id.Namespace != "team" || id.Name != "bot" || id.UID == "" {
		t.Fatalf("identity %+v", id)
	}
	if _, err := v.Verify(ctx, other); !errors.Is(err, kubeauth.ErrRejected) {
		t.Fatalf("token for another audience: %v, want rejected", err)
	}
	if _, err := v.Verify(ctx, "eyJhbGciOiJSUzI1NiJ9.e30.sig"); !errors.Is(err, kubeauth.ErrRejected) {
		t.Fatalf("garbage token: %v, want rejected", err)
	}
	// Past exp (a minted token lives at least 10 minutes) no cached verdict
	// accepts it.
	advance(3 * time.Hour)
	if _, err := v.Verify(ctx, good); !errors.Is(err, kubeauth.ErrRejected) {
		t.Fatalf("expired token: %v, want rejected", err)
	}
}

func TestTokenReviewFallback(t *testing.T) {
	cs := needEnv(t)
	ctx := t.Context()
	good := serviceAccount(t, cs, kubeauth.Audience)
	other := serviceAccount(t, cs, "someone-else")
	v, err := kubeauth.NewVerifier(env.Config, kubeauth.VerifierOptions{DiscoveryPath: "/no-such-discovery"})
	if err != nil {
		t.Fatal(err)
	}
	if iss := v.Issuer(ctx); iss != "" {
		t.Fatalf("issuer %q with failing discovery", iss)
	}
	id, err := v.Verify(ctx, good)
	if err != nil || id.Username != "system:serviceaccount:team:bot" || id.Namespace != "team" {
		t.Fatalf("token review: %+v %v", id, err)
	}
	if _, err := v.Verify(ctx, other); !errors.Is(err, kubeauth.ErrRejected) {
		t.Fatalf("token review of another audience: %v, want rejected", err)
	}
}

func TestSubjectAccessReview(t *testing.T) {
	cs := needEnv(t)
	ctx := t.Context()
	token := serviceAccount(t, cs, kubeauth.Audience)
	v, err := kubeauth.NewVerifier(env.Config, kubeauth.VerifierOptions{})
	if err != nil {
		t.Fatal(err)
	}
	id, err := v.Verify(ctx, token)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kubeauth.NewAuthorizer(env.Config, kubeauth.AuthorizerOptions{Mode: "impersonate"}); !errors.Is(err, kubeauth.ErrModeUnsupported) {
		t.Fatalf("impersonate mode: %v", err)
	}
	mkRole(t, cs, "svc-zones-read", rbacv1.PolicyRule{APIGroups: []string{"service.io"}, Resources: []string{"dnszones"}, Verbs: []string{"read"}})
	mkRole(t, cs, "svc-records-example", rbacv1.PolicyRule{APIGroups: []string{"service.io"}, Resources: []string{"dnsrecordsets"}, Verbs: []string{"write"}, ResourceNames: []string{"example.com"}})

	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	a, err := kubeauth.NewAuthorizer(env.Config, kubeauth.AuthorizerOptions{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	// RBAC reaches the authorizer's cache shortly after the writes.
	eventually(t, func() bool {
		fresh, _ := kubeauth.NewAuthorizer(env.Config, kubeauth.AuthorizerOptions{})
		return fresh.Authorize(ctx, id, "dnszones.read", "").Allowed
	})
	cases := []struct {
		perm, zone string
		allow      bool
	}{
		{"dnszones.read", "", true},
		{"dnszones.write", "", false},
		{"dnsrecordsets.write", "example.com", true},
		{"dnsrecordsets.write", "example.org", false},
		{"dnsrecordsets.write", "", false},
		{"users.read", "", false},
	}
	for _, c := range cases {
		if d := a.Authorize(ctx, id, c.perm, c.zone); d.Allowed != c.allow {
			t.Fatalf("%s on %q: %+v, want allowed=%v", c.perm, c.zone, d, c.allow)
		}
	}
	// A denial is cached 30 s: a new grant shows after that.
	mkRole(t, cs, "svc-zones-write", rbacv1.PolicyRule{APIGroups: []string{"service.io"}, Resources: []string{"dnszones"}, Verbs: []string{"write"}})
	eventually(t, func() bool {
		fresh, _ := kubeauth.NewAuthorizer(env.Config, kubeauth.AuthorizerOptions{})
		return fresh.Authorize(ctx, id, "dnszones.write", "").Allowed
	})
	if a.Authorize(ctx, id, "dnszones.write", "").Allowed {
		t.Fatal("cached denial not honoured")
	}
	mu.Lock()
	now = now.Add(31 * time.Second)
	mu.Unlock()
	if !a.Authorize(ctx, id, "dnszones.write", "").Allowed {
		t.Fatal("denial cached past 30 s")
	}

	// An unreachable apiserver denies with a reason.
	down := rest.CopyConfig(env.Config)
	down.Host = "https://127.0.0.1:1"
	down.Timeout = time.Second
	off, err := kubeauth.NewAuthorizer(down, kubeauth.AuthorizerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d := off.Authorize(ctx, id, "dnszones.read", ""); d.Allowed || !strings.Contains(d.Reason, "unavailable") {
		t.Fatalf("outage: %+v, want a denial with a reason", d)
	}
}

func mkRole(t *testing.T, cs kubernetes.Interface, name string, rule rbacv1.PolicyRule) {
	t.Helper()
	ctx := t.Context()
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{rule}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "bot", Namespace: "team"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatal("condition not met in time")
		case <-time.After(100 * time.Millisecond):
		}
	}
}
