// Package oidctest runs an in-process OpenID Connect provider for tests: a
// TLS server on 127.0.0.1 with a discovery document, a key set of a
// generated RSA key, an /authorize endpoint that redirects back with a code
// and a /token endpoint that checks the PKCE verifier and the client secret
// and answers a signed ID token carrying the login's nonce.
package oidctest

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"
)

// Provider is the fake identity provider.
type Provider struct {
	Server       *httptest.Server
	Issuer       string
	Key          *rsa.PrivateKey
	KID          string
	ClientID     string
	ClientSecret string

	mu sync.Mutex
	// Now is the provider's clock (time.Now when nil).
	Now func() time.Time
	// Claims are added to the ID tokens of logins (sub defaults to "alice").
	Claims map[string]any
	// AuthorizeError makes /authorize redirect back with this error code.
	AuthorizeError string
	// TokenNonce, when set, replaces the login's nonce in the ID token.
	TokenNonce string
	// DiscoveryDown makes the discovery document answer 503.
	DiscoveryDown bool
	// TokenStatus, when set, is the status of every /token answer.
	TokenStatus int
	codes       map[string]grant
	// Requests counts requests per path.
	requests map[string]int
}

type grant struct {
	clientID, redirectURI, challenge, nonce string
}

// New starts a provider for client clientID with secret (empty: a public
// client) and stops it when the test ends.
func New(t testing.TB, clientID, secret string) *Provider {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p := &Provider{Key: key, KID: "k1", ClientID: clientID, ClientSecret: secret, codes: map[string]grant{}, requests: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", p.discovery)
	mux.HandleFunc("/jwks", p.jwks)
	mux.HandleFunc("/authorize", p.authorize)
	mux.HandleFunc("/token", p.token)
	p.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.requests[r.URL.Path]++
		p.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	p.Issuer = p.Server.URL
	t.Cleanup(p.Server.Close)
	return p
}

// Client trusts the provider's certificate.
func (p *Provider) Client() *http.Client { return p.Server.Client() }

// Requests reports how many requests reached path.
func (p *Provider) Requests(path string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.requests[path]
}

// Set changes the provider's behaviour under its lock.
func (p *Provider) Set(f func(p *Provider)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(p)
}

func (p *Provider) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

func (p *Provider) discovery(w http.ResponseWriter, _ *http.Request) {
	p.mu.Lock()
	down := p.DiscoveryDown
	p.mu.Unlock()
	if down {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	writeJSON(w, map[string]any{
		"issuer": p.Issuer, "authorization_endpoint": p.Issuer + "/authorize", "token_endpoint": p.Issuer + "/token",
		"jwks_uri": p.Issuer + "/jwks", "id_token_signing_alg_values_supported": []string{"RS256"},
		"response_types_supported": []string{"code"}, "code_challenge_methods_supported": []string{"S256"},
	})
}

func (p *Provider) jwks(w http.ResponseWriter, _ *http.Request) {
	pub := p.Key.PublicKey
	writeJSON(w, map[string]any{"keys": []any{map[string]any{
		"kty": "RSA", "alg": "RS256", "use": "sig", "kid": p.KID,
		"n": b64(pub.N.Bytes()), "e": b64(big.NewInt(int64(pub.E)).Bytes()),
	}}})
}

func (p *Provider) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	redirect, err := url.Parse(q.Get("redirect_uri"))
	if err != nil || q.Get("redirect_uri") == "" {
		http.Error(w, "redirect_uri", http.StatusBadRequest)
		return
	}
	if q.Get("client_id") != p.ClientID || q.Get("response_type") != "code" || q.Get("code_challenge_method") != "S256" ||
		q.Get("code_challenge") == "" || q.Get("state") == "" || q.Get("nonce") == "" {
		http.Error(w, "bad authorization request", http.StatusBadRequest)
		return
	}
	back := redirect.Query()
	back.Set("state", q.Get("state"))
	p.mu.Lock()
	if p.AuthorizeError != "" {
		back.Set("error", p.AuthorizeError)
	} else {
		code := b64(randomBytes(16))
		p.codes[code] = grant{clientID: q.Get("client_id"), redirectURI: q.Get("redirect_uri"), challenge: q.Get("code_challenge"), nonce: q.Get("nonce")}
		back.Set("code", code)
	}
	p.mu.Unlock()
	redirect.RawQuery = back.Encode()
	http.Redirect(w, r, redirect.String(), http.StatusFound)
}

func (p *Provider) token(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	status := p.TokenStatus
	p.mu.Unlock()
	if status != 0 {
		http.Error(w, "token endpoint failing", status)
		return
	}
	if r.Method != http.MethodPost || r.ParseForm() != nil {
		tokenError(w, http.StatusBadRequest, "invalid_request")
		return
	}
	id, secret, basic := r.BasicAuth()
	if basic {
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	} else {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	if id != p.ClientID || (p.ClientSecret != "" && subtle.ConstantTimeCompare([]byte(secret), []byte(p.ClientSecret)) != 1) {
		tokenError(w, http.StatusUnauthorized, "invalid_client")
		return
	}
	p.mu.Lock()
	g, ok := p.codes[r.PostForm.Get("code")]
	delete(p.codes, r.PostForm.Get("code")) // single use
	claims := map[string]any{"sub": "alice"}
	for k, v := range p.Claims {
		claims[k] = v
	}
	nonce := g.nonce
	if p.TokenNonce != "" {
		nonce = p.TokenNonce
	}
	p.mu.Unlock()
	if !ok || r.PostForm.Get("grant_type") != "authorization_code" || r.PostForm.Get("redirect_uri") != g.redirectURI || g.clientID != id {
		tokenError(w, http.StatusBadRequest, "invalid_grant")
		return
	}
	sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
	if b64(sum[:]) != g.challenge {
		tokenError(w, http.StatusBadRequest, "invalid_grant")
		return
	}
	now := p.now()
	claims["iss"], claims["aud"], claims["nonce"] = p.Issuer, p.ClientID, nonce
	claims["iat"], claims["exp"] = now.Unix(), now.Add(time.Hour).Unix()
	writeJSON(w, map[string]any{"access_token": b64(randomBytes(16)), "token_type": "Bearer", "expires_in": 3600, "id_token": p.Sign(claims, nil)})
}

// IDToken signs claims with iss, aud (the client id), iat and exp (one hour)
// filled in when absent.
func (p *Provider) IDToken(claims map[string]any) string {
	c := map[string]any{}
	for k, v := range claims {
		c[k] = v
	}
	now := p.now()
	for k, v := range map[string]any{"iss": p.Issuer, "aud": p.ClientID, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()} {
		if _, ok := c[k]; !ok {
			c[k] = v
		}
	}
	return p.Sign(c, nil)
}

// Sign makes an RS256 JWT of claims with the provider's key; header members
// are added to (or replace) alg, kid and typ JWT.
func (p *Provider) Sign(claims, header map[string]any) string {
	return SignWith(p.Key, p.KID, claims, header)
}

// SignWith signs with any key (a wrong key makes a bad signature).
func SignWith(key *rsa.PrivateKey, kid string, claims, header map[string]any) string {
	h := map[string]any{"alg": "RS256", "kid": kid, "typ": "JWT"}
	for k, v := range header {
		h[k] = v
	}
	hb, _ := json.Marshal(h)
	cb, _ := json.Marshal(claims)
	in := b64(hb) + "." + b64(cb)
	sum := sha256.Sum256([]byte(in))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		panic(err)
	}
	return in + "." + b64(sig)
}

func tokenError(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}
