// Package kubeauth authenticates Kubernetes ServiceAccount tokens (audience
// "service") against the cluster's OIDC discovery document and key set,
// read through the apiserver with the pod's credentials, with TokenReview as
// the fallback while discovery fails; and authorizes Kubernetes identities
// with SubjectAccessReview.
package kubeauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/svcdns/svc/internal/verdicts"
)

// Audience is the audience every accepted token carries.
const Audience = "service"

// Cache lifetimes of verdicts.
const (
	AcceptTTL = 2 * time.Minute
	RejectTTL = 10 * time.Second
	// rediscover is how often a failed discovery is retried.
	rediscover = 10 * time.Second
	maxEntries = 10000
)

// ErrRejected answers a token that is not a valid ServiceAccount token for
// this service (wrong audience, expired, bad signature, unknown issuer).
var ErrRejected = errors.New("kubernetes token rejected")

// Identity is an authenticated Kubernetes user.
type Identity struct {
	Username  string // system:serviceaccount:<ns>:<name>
	UID       string
	Groups    []string
	Namespace string // of a service account
	Name      string // of a service account
}

// VerifierOptions configure NewVerifier.
type VerifierOptions struct {
	Logger *slog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// DiscoveryPath and JWKSPath are read from the apiserver (defaults
	// /.well-known/openid-configuration and /openid/v1/jwks).
	DiscoveryPath, JWKSPath string
}

// Verifier checks ServiceAccount tokens.
type Verifier struct {
	cfg     *rest.Config
	http    *http.Client
	cs      kubernetes.Interface
	opts    VerifierOptions
	log     *slog.Logger
	mu      sync.Mutex
	oidc    *oidc.IDTokenVerifier
	issuer  string
	lastTry time.Time
	cache   *verdicts.Cache[Identity]
}

// NewVerifier returns a verifier talking to the apiserver of cfg. Discovery
// runs on first use and again every 10 s while it fails.
func NewVerifier(cfg *rest.Config, opts VerifierOptions) (*Verifier, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.DiscoveryPath == "" {
		opts.DiscoveryPath = "/.well-known/openid-configuration"
	}
	if opts.JWKSPath == "" {
		opts.JWKSPath = "/openid/v1/jwks"
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeauth: http client: %w", err)
	}
	cs, err := kubernetes.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("kubeauth: client: %w", err)
	}
	return &Verifier{cfg: cfg, http: hc, cs: cs, opts: opts, log: opts.Logger, cache: verdicts.New[Identity](AcceptTTL, RejectTTL, maxEntries)}, nil
}

func (v *Verifier) url(path string) string {
	return strings.TrimSuffix(v.cfg.Host, "/") + path
}

// discover returns the JWKS verifier, or nil while discovery fails.
func (v *Verifier) discover(ctx context.Context) *oidc.IDTokenVerifier {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.oidc != nil {
		return v.oidc
	}
	now := v.opts.Now()
	if !v.lastTry.IsZero() && now.Sub(v.lastTry) < rediscover {
		return nil
	}
	v.lastTry = now
	issuer, err := v.fetchIssuer(ctx)
	if err != nil {
		v.log.Warn("kubeauth: service account issuer discovery failed; using TokenReview", "err", err)
		return nil
	}
	// The key set is read through the apiserver too, whatever jwks_uri says.
	kctx := oidc.ClientContext(context.WithoutCancel(ctx), v.http)
	keys := oidc.NewRemoteKeySet(kctx, v.url(v.opts.JWKSPath))
	v.issuer = issuer
	v.oidc = oidc.NewVerifier(issuer, keys, &oidc.Config{
		ClientID:             Audience,
		SupportedSigningAlgs: []string{oidc.RS256, oidc.ES256, oidc.RS384, oidc.RS512, oidc.ES384, oidc.ES512, oidc.PS256},
		Now:                  v.opts.Now,
	})
	return v.oidc
}

func (v *Verifier) fetchIssuer(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.url(v.opts.DiscoveryPath), nil)
	if err != nil {
		return "", err
	}
	resp, err := v.http.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("discovery: %s", resp.Status)
	}
	var doc struct {
		Issuer string `json:"issuer"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(nil, resp.Body, 1<<20)).Decode(&doc); err != nil {
		return "", fmt.Errorf("discovery: %w", err)
	}
	if doc.Issuer == "" {
		return "", errors.New("discovery: no issuer")
	}
	return doc.Issuer, nil
}

// Issuer is the cluster's service account issuer once discovered ("" before
// or while discovery fails); the authenticator chain routes JWTs by it.
func (v *Verifier) Issuer(ctx context.Context) string {
	if v.discover(ctx) == nil {
		return ""
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.issuer
}

// Verify authenticates a bearer token. Verdicts are cached by sha256(token):
// accepted ones for at most 2 minutes and never past exp, rejections 10 s.
func (v *Verifier) Verify(ctx context.Context, token string) (Identity, error) {
	key := verdicts.Key(token)
	now := v.opts.Now()
	if id, err, ok := v.cache.Get(key, now, nil); ok {
		return id, err
	}
	var (
		id  Identity
		exp time.Time
		err error
	)
	if ver := v.discover(ctx); ver != nil {
		id, exp, err = v.verifyJWT(ctx, ver, token)
	} else {
		id, exp, err = v.tokenReview(ctx, token)
	}
	if err != nil && !errors.Is(err, ErrRejected) {
		return Identity{}, err // an outage is not a verdict: not cached
	}
	v.cache.Put(key, id, err, exp, now)
	return id, err
}

type kubeClaims struct {
	Sub        string `json:"sub"`
	Kubernetes struct {
		Namespace      string `json:"namespace"`
		ServiceAccount struct {
			Name string `json:"name"`
			UID  string `json:"uid"`
		} `json:"serviceaccount"`
	} `json:"kubernetes.io"`
}

func (v *Verifier) verifyJWT(ctx context.Context, ver *oidc.IDTokenVerifier, token string) (Identity, time.Time, error) {
	tok, err := ver.Verify(ctx, token)
	if err != nil {
		if strings.Contains(err.Error(), "fetching keys") {
			// The key set is unreachable: discovery is failing.
			v.mu.Lock()
			v.oidc = nil
			v.mu.Unlock()
			return v.tokenReview(ctx, token)
		}
		return Identity{}, time.Time{}, fmt.Errorf("%w: %v", ErrRejected, err)
	}
	var c kubeClaims
	if err := tok.Claims(&c); err != nil {
		return Identity{}, time.Time{}, fmt.Errorf("%w: claims: %v", ErrRejected, err)
	}
	ns, name := c.Kubernetes.Namespace, c.Kubernetes.ServiceAccount.Name
	if ns == "" || name == "" || c.Sub != "system:serviceaccount:"+ns+":"+name {
		return Identity{}, time.Time{}, fmt.Errorf("%w: not a service account token", ErrRejected)
	}
	return Identity{
		Username:  c.Sub,
		UID:       c.Kubernetes.ServiceAccount.UID,
		Groups:    []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
		Namespace: ns,
		Name:      name,
	}, tok.Expiry, nil
}

func (v *Verifier) tokenReview(ctx context.Context, token string) (Identity, time.Time, error) {
	tr, err := v.cs.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{Audience}},
	}, metav1.CreateOptions{})
	if err != nil {
		return Identity{}, time.Time{}, fmt.Errorf("kubeauth: token review: %w", err)
	}
	st := tr.Status
	if !st.Authenticated {
		return Identity{}, time.Time{}, fmt.Errorf("%w: %s", ErrRejected, st.Error)
	}
	audOK := false
	for _, a := range st.Audiences {
		audOK = audOK || a == Audience
	}
	if !audOK {
		return Identity{}, time.Time{}, fmt.Errorf("%w: audience", ErrRejected)
	}
	id := Identity{Username: st.User.Username, UID: st.User.UID, Groups: st.User.Groups}
	if rest, ok := strings.CutPrefix(st.User.Username, "system:serviceaccount:"); ok {
		id.Namespace, id.Name, _ = strings.Cut(rest, ":")
	}
	return id, time.Time{}, nil
}
