package oidc

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/svcdns/svc/internal/auth"
)

// Errors of verification. ErrRejected is a verdict (the credential is not
// valid); ErrUnavailable is an outage (the provider could not be asked) and
// is never cached.
var (
	ErrRejected    = errors.New("oidc: token rejected")
	ErrUnavailable = errors.New("oidc: identity provider unavailable")
)

// Limits of the HTTP client that talks to providers.
const (
	httpTimeout     = 10 * time.Second
	maxResponseBody = 1 << 20
	maxRedirects    = 3
	// rediscover is how often a failed discovery is retried.
	rediscover = 10 * time.Second
	// maxGroups bounds the groups taken from a token; the rest are ignored
	// (fewer groups can only mean fewer grants).
	maxGroups = 1024
)

// Options configure a Set.
type Options struct {
	Logger *slog.Logger
	// Now is the clock (time.Now when nil); it also decides token expiry.
	Now func() time.Time
	// HTTPClient talks to the providers (discovery, key set, token
	// endpoint); nil uses a client with the system roots. Either way a
	// 10 s timeout, 3 redirects and a 1 MiB answer limit are applied.
	HTTPClient *http.Client
	// SecretRef reads clientSecretRef (a key of a Secret in the service's
	// namespace; Kubernetes store only). nil: clientSecretRef is reported
	// as unreadable.
	SecretRef func(ctx context.Context, name, key string) ([]byte, error)
}

// boundedClient copies c (or a default client) with the limits applied.
func boundedClient(c *http.Client) *http.Client {
	var rt http.RoundTripper
	if c != nil && c.Transport != nil {
		rt = c.Transport
	} else {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.TLSHandshakeTimeout = 5 * time.Second
		t.ResponseHeaderTimeout = httpTimeout
		t.MaxIdleConnsPerHost = 4
		rt = t
	}
	out := &http.Client{Transport: limitBody{rt}, Timeout: httpTimeout}
	if c != nil && c.Jar != nil {
		out.Jar = c.Jar
	}
	out.CheckRedirect = func(_ *http.Request, via []*http.Request) error {
		if len(via) >= maxRedirects {
			return errors.New("too many redirects")
		}
		return nil
	}
	return out
}

// limitBody cuts every answer body at maxResponseBody.
type limitBody struct{ rt http.RoundTripper }

func (l limitBody) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := l.rt.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	res.Body = struct {
		io.Reader
		io.Closer
	}{io.LimitReader(res.Body, maxResponseBody), res.Body}
	return res, nil
}

// Identity is a verified person of a provider, mapped to service names.
type Identity struct {
	Provider string
	Subject  string
	Username string   // with the username prefix
	Groups   []string // with the groups prefix
	Expiry   time.Time
}

// Principal is the API principal of the identity; grants come from role
// bindings of its user name and groups, evaluated live.
func (id Identity) Principal(method string) *auth.Principal {
	return &auth.Principal{Kind: "User", ID: id.Subject, Name: id.Username, Groups: id.Groups,
		Provider: id.Provider, AuthMethod: method}
}

// Provider is one configured identity provider. Discovery runs on first
// use and again every 10 s while it fails.
type Provider struct {
	cfg    settings
	source string // config or object
	opts   *Options
	http   *http.Client

	mu       sync.Mutex
	disc     *gooidc.Provider
	verifier *gooidc.IDTokenVerifier
	lastTry  time.Time
	lastErr  error
}

func newProvider(s Spec, source string, opts *Options, hc *http.Client) *Provider {
	return &Provider{cfg: resolve(s), source: source, opts: opts, http: hc}
}

// ID names the provider in routes and prefixes.
func (p *Provider) ID() string { return p.cfg.ID }

// DisplayName is shown on the login page.
func (p *Provider) DisplayName() string { return p.cfg.displayName() }

// IssuerURL is the provider's issuer.
func (p *Provider) IssuerURL() string { return p.cfg.IssuerURL }

// ClientID is the service's client at the provider.
func (p *Provider) ClientID() string { return p.cfg.ClientID }

// Source is "config" (auth.identityProviders) or "object".
func (p *Provider) Source() string { return p.source }

// Spec returns the provider's settings as configured.
func (p *Provider) Spec() Spec { return p.cfg.Spec }

// discover returns the discovered provider and its verifier.
func (p *Provider) discover(ctx context.Context) (*gooidc.Provider, *gooidc.IDTokenVerifier, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.disc != nil {
		return p.disc, p.verifier, nil
	}
	now := p.opts.Now()
	if !p.lastTry.IsZero() && now.Sub(p.lastTry) < rediscover && now.Sub(p.lastTry) >= 0 {
		return nil, nil, p.lastErr
	}
	p.lastTry = now
	// Not bound to the caller: one request giving up must not fail
	// discovery for the next 10 s. The client's timeout bounds it.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), httpTimeout)
	defer cancel()
	d, err := gooidc.NewProvider(gooidc.ClientContext(dctx, p.http), p.cfg.IssuerURL)
	if err != nil {
		p.lastErr = fmt.Errorf("%w: discovery of %s: %s", ErrUnavailable, p.cfg.IssuerURL, shorten(err.Error()))
		p.opts.Logger.Warn("oidc: discovery failed", "provider", p.cfg.ID, "issuer", p.cfg.IssuerURL, "err", shorten(err.Error()))
		return nil, nil, p.lastErr
	}
	p.disc, p.lastErr = d, nil
	p.verifier = d.Verifier(&gooidc.Config{SkipClientIDCheck: true, Now: p.opts.Now})
	return p.disc, p.verifier, nil
}

// shorten keeps error texts (which may quote an answer body) short.
func shorten(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// Check runs discovery (at most every 10 s while it fails) and reads the
// client secret; the errors are diagnoses for GET /iam/identityproviders.
func (p *Provider) Check(ctx context.Context) []string {
	var out []string
	if _, _, err := p.discover(ctx); err != nil {
		out = append(out, err.Error())
	}
	if _, err := p.secret(ctx); err != nil {
		out = append(out, err.Error())
	}
	return out
}

// secret reads the client secret on each use so that a rotated secret file
// is picked up; "" for a public client (no secret configured).
func (p *Provider) secret(ctx context.Context) (string, error) {
	switch {
	case p.cfg.ClientSecretFile != "":
		f, err := os.Open(p.cfg.ClientSecretFile)
		if err != nil {
			return "", fmt.Errorf("client secret file %s: %w", p.cfg.ClientSecretFile, unwrapPath(err))
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, 64<<10))
		if err != nil {
			return "", fmt.Errorf("client secret file %s: %w", p.cfg.ClientSecretFile, unwrapPath(err))
		}
		s := strings.TrimSpace(string(b))
		if s == "" {
			return "", fmt.Errorf("client secret file %s is empty", p.cfg.ClientSecretFile)
		}
		return s, nil
	case p.cfg.ClientSecretRef != nil:
		r := p.cfg.ClientSecretRef
		if p.opts.SecretRef == nil {
			return "", fmt.Errorf("clientSecretRef %s/%s: Secrets are only read with the kube store driver; use clientSecretFile", r.Name, r.Key)
		}
		b, err := p.opts.SecretRef(ctx, r.Name, r.Key)
		if err != nil {
			return "", fmt.Errorf("clientSecretRef %s/%s: %w", r.Name, r.Key, err)
		}
		s := strings.TrimSpace(string(b))
		if s == "" {
			return "", fmt.Errorf("clientSecretRef %s/%s is empty", r.Name, r.Key)
		}
		return s, nil
	}
	return "", nil
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// verifyMode tells bearer tokens from login ID tokens.
type verifyMode int

const (
	modeBearer verifyMode = iota
	modeLogin
)

// verify checks a compact JWT: typ, signature, issuer, expiry, sub,
// audience and azp; then maps its claims.
func (p *Provider) verify(ctx context.Context, raw string, mode verifyMode) (Identity, error) {
	if typ := headerType(raw); strings.EqualFold(typ, "at+jwt") || strings.EqualFold(typ, "application/at+jwt") {
		return Identity{}, fmt.Errorf("%w: an access token (typ %s) is not an ID token", ErrRejected, typ)
	}
	_, v, err := p.discover(ctx)
	if err != nil {
		return Identity{}, err
	}
	tok, err := v.Verify(ctx, raw)
	if err != nil {
		if strings.Contains(err.Error(), "fetching keys") {
			return Identity{}, fmt.Errorf("%w: key set of %s: %s", ErrUnavailable, p.cfg.IssuerURL, shorten(err.Error()))
		}
		return Identity{}, fmt.Errorf("%w: %s", ErrRejected, shorten(err.Error()))
	}
	if tok.Subject == "" {
		return Identity{}, fmt.Errorf("%w: no sub claim", ErrRejected)
	}
	var claims map[string]any
	if err := tok.Claims(&claims); err != nil {
		return Identity{}, fmt.Errorf("%w: claims: %v", ErrRejected, err)
	}
	if err := p.checkAudience(tok.Audience, claims, mode); err != nil {
		return Identity{}, err
	}
	return p.identity(tok.Subject, tok.Expiry, claims)
}

// checkAudience: aud must contain the client id or a configured audience
// (the client id alone at login); with several audiences azp must name the
// service's client.
func (p *Provider) checkAudience(aud []string, claims map[string]any, mode verifyMode) error {
	ok := false
	for _, a := range aud {
		if a == p.cfg.ClientID {
			ok = true
		} else if mode == modeBearer {
			for _, b := range p.cfg.Audiences {
				ok = ok || a == b
			}
		}
	}
	if !ok {
		return fmt.Errorf("%w: audience %q is not accepted", ErrRejected, aud)
	}
	if len(aud) > 1 {
		azp, _ := claims["azp"].(string)
		if azp != p.cfg.ClientID {
			return fmt.Errorf("%w: several audiences and azp %q is not the client id", ErrRejected, azp)
		}
	}
	return nil
}

func (p *Provider) identity(sub string, exp time.Time, claims map[string]any) (Identity, error) {
	name, _ := claims[p.cfg.usernameClaim].(string)
	if name == "" {
		return Identity{}, fmt.Errorf("%w: no %s claim", ErrRejected, p.cfg.usernameClaim)
	}
	if p.cfg.usernameClaim == "email" {
		// Like Kubernetes: an email named unverified does not name a user.
		if v, present := claims["email_verified"]; present && v != true {
			return Identity{}, fmt.Errorf("%w: email is not verified", ErrRejected)
		}
	}
	id := Identity{Provider: p.cfg.ID, Subject: sub, Username: p.cfg.usernamePrefix + name, Expiry: exp}
	add := func(g string) {
		if g != "" && len(id.Groups) < maxGroups {
			id.Groups = append(id.Groups, p.cfg.groupsPrefix+g)
		}
	}
	switch gs := claims[p.cfg.groupsClaim].(type) {
	case string:
		add(gs)
	case []any:
		for _, g := range gs {
			if s, ok := g.(string); ok {
				add(s)
			}
		}
	}
	return id, nil
}

// headerType returns the typ member of a compact JWT's protected header.
func headerType(raw string) string {
	h, _, ok := strings.Cut(raw, ".")
	if !ok {
		return ""
	}
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(h, "="))
	if err != nil {
		return ""
	}
	var hdr struct {
		Typ string `json:"typ"`
	}
	_ = json.Unmarshal(b, &hdr)
	return hdr.Typ
}

// oauthConfig is the authorization-code client of the provider.
func (p *Provider) oauthConfig(d *gooidc.Provider, redirectURI, secret string) *oauth2.Config {
	return &oauth2.Config{ClientID: p.cfg.ClientID, ClientSecret: secret, Endpoint: d.Endpoint(),
		RedirectURL: redirectURI, Scopes: p.cfg.scopes}
}

// AuthCodeURL is where the browser is sent to log in: authorization-code
// flow with PKCE (S256), state and nonce.
func (p *Provider) AuthCodeURL(ctx context.Context, ls LoginState) (string, error) {
	d, _, err := p.discover(ctx)
	if err != nil {
		return "", err
	}
	if d.Endpoint().AuthURL == "" {
		return "", fmt.Errorf("%w: %s names no authorization_endpoint", ErrUnavailable, p.cfg.IssuerURL)
	}
	return p.oauthConfig(d, ls.RedirectURI, "").AuthCodeURL(ls.State, oauth2.S256ChallengeOption(ls.Verifier),
		gooidc.Nonce(ls.Nonce)), nil
}

// Exchange redeems an authorization code with the PKCE verifier and the
// client secret and verifies the ID token of the answer, including its
// nonce.
func (p *Provider) Exchange(ctx context.Context, ls LoginState, code string) (Identity, error) {
	d, _, err := p.discover(ctx)
	if err != nil {
		return Identity{}, err
	}
	secret, err := p.secret(ctx)
	if err != nil {
		return Identity{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	xctx, cancel := context.WithTimeout(context.WithValue(ctx, oauth2.HTTPClient, p.http), httpTimeout)
	defer cancel()
	tok, err := p.oauthConfig(d, ls.RedirectURI, secret).Exchange(xctx, code, oauth2.VerifierOption(ls.Verifier))
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode < 500 {
			// The provider refused the code (expired, reused, wrong verifier
			// or client credentials): no detail is passed on.
			code := re.ErrorCode
			if code == "" {
				code = re.Response.Status
			}
			return Identity{}, fmt.Errorf("%w: token endpoint refused the code: %s", ErrRejected, shorten(code))
		}
		return Identity{}, fmt.Errorf("%w: token endpoint: %s", ErrUnavailable, shorten(err.Error()))
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return Identity{}, fmt.Errorf("%w: the token answer carries no id_token", ErrRejected)
	}
	id, err := p.verify(ctx, raw, modeLogin)
	if err != nil {
		return Identity{}, err
	}
	var c struct {
		Nonce string `json:"nonce"`
	}
	if err := json.Unmarshal(jwtPayload(raw), &c); err != nil || subtle.ConstantTimeCompare([]byte(c.Nonce), []byte(ls.Nonce)) != 1 {
		return Identity{}, fmt.Errorf("%w: nonce does not match the login", ErrRejected)
	}
	return id, nil
}

// jwtPayload decodes the payload of a compact JWT without verifying it.
func jwtPayload(raw string) []byte {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return nil
	}
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return nil
	}
	return b
}
