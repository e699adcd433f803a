package oidc

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svcdns/svc/internal/oidc/oidctest"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newClock() *clock { return &clock{t: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)} }

func testSet(t *testing.T, ip *oidctest.Provider, c *clock, mutate ...func(*Spec)) *Set {
	t.Helper()
	sp := Spec{ID: "corp", IssuerURL: ip.Issuer, ClientID: ip.ClientID, Audiences: []string{"svc-cli"}}
	for _, m := range mutate {
		m(&sp)
	}
	s, err := NewSet([]Spec{sp}, Options{Now: c.now, HTTPClient: ip.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestBearerTokens(t *testing.T) {
	c := newClock()
	ip := oidctest.New(t, "svc", "s3cret")
	ip.Now = c.now
	s := testSet(t, ip, c)
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	base := func(extra map[string]any) map[string]any {
		m := map[string]any{"sub": "u-1", "groups": []any{"dev", "ops"}}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	now := c.now()
	cases := []struct {
		name    string
		token   string
		claimed bool
		ok      bool
	}{
		{"good", ip.IDToken(base(nil)), true, true},
		{"cli audience", ip.IDToken(base(map[string]any{"aud": "svc-cli"})), true, true},
		{"several audiences with azp", ip.IDToken(base(map[string]any{"aud": []string{"svc-cli", "svc"}, "azp": "svc"})), true, true},
		{"wrong audience", ip.IDToken(base(map[string]any{"aud": "someone-else"})), true, false},
		{"several audiences without azp", ip.IDToken(base(map[string]any{"aud": []string{"svc-cli", "svc"}})), true, false},
		{"several audiences, azp wrong", ip.IDToken(base(map[string]any{"aud": []string{"svc-cli", "svc"}, "azp": "svc-cli"})), true, false},
		{"access token typ", ip.Sign(base(map[string]any{"iss": ip.Issuer, "aud": "svc", "exp": now.Add(time.Hour).Unix()}), map[string]any{"typ": "at+jwt"}), true, false},
		{"access token typ, media type", ip.Sign(base(map[string]any{"iss": ip.Issuer, "aud": "svc", "exp": now.Add(time.Hour).Unix()}), map[string]any{"typ": "application/at+jwt"}), true, false},
		{"no sub", ip.IDToken(map[string]any{"groups": []any{"dev"}}), true, false},
		{"expired", ip.IDToken(base(map[string]any{"exp": now.Add(-time.Minute).Unix()})), true, false},
		{"wrong signature", oidctest.SignWith(other, ip.KID, base(map[string]any{"iss": ip.Issuer, "aud": "svc", "exp": now.Add(time.Hour).Unix()}), nil), true, false},
		{"unknown issuer", ip.IDToken(base(map[string]any{"iss": "https://elsewhere.example"})), false, false},
		{"not a jwt", "svc_notajwt", false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, claimed, err := s.AuthenticateBearer(context.Background(), tc.token)
			if claimed != tc.claimed {
				t.Fatalf("claimed %v, want %v (err %v)", claimed, tc.claimed, err)
			}
			if !tc.claimed {
				return
			}
			if tc.ok != (err == nil) {
				t.Fatalf("err %v, want ok %v", err, tc.ok)
			}
			if err != nil {
				if !errors.Is(err, ErrRejected) {
					t.Fatalf("err %v is not a rejection", err)
				}
				return
			}
			if p.Kind != "User" || p.Name != "corp:u-1" || p.ID != "u-1" || p.Provider != "corp" || p.AuthMethod != "token" ||
				strings.Join(p.Groups, ",") != "corp:dev,corp:ops" || p.FrozenGrants != nil {
				t.Fatalf("principal %+v", p)
			}
		})
	}
}

func TestClaimMapping(t *testing.T) {
	c := newClock()
	ip := oidctest.New(t, "svc", "")
	ip.Now = c.now
	empty := ""
	s := testSet(t, ip, c, func(sp *Spec) {
		sp.UsernameClaim, sp.GroupsClaim, sp.UsernamePrefix, sp.GroupsPrefix = "email", "roles", &empty, ptr("idp/")
	})
	p, _, err := s.AuthenticateBearer(context.Background(), ip.IDToken(map[string]any{"sub": "x", "email": "a@example.com", "email_verified": true, "roles": "admins"}))
	if err != nil || p.Name != "a@example.com" || strings.Join(p.Groups, ",") != "idp/admins" {
		t.Fatalf("%+v %v", p, err)
	}
	if _, _, err := s.AuthenticateBearer(context.Background(), ip.IDToken(map[string]any{"sub": "x", "email": "b@example.com", "email_verified": false})); !errors.Is(err, ErrRejected) {
		t.Fatalf("unverified email: %v", err)
	}
	if _, _, err := s.AuthenticateBearer(context.Background(), ip.IDToken(map[string]any{"sub": "y"})); !errors.Is(err, ErrRejected) {
		t.Fatalf("no username claim: %v", err)
	}
}

func ptr(s string) *string { return &s }

// TestVerdictCache: an accepted token is not verified again until
// min(exp, 15 minutes); a token expiring sooner leaves the cache at exp.
func TestVerdictCache(t *testing.T) {
	c := newClock()
	ip := oidctest.New(t, "svc", "")
	ip.Now = c.now
	s := testSet(t, ip, c)
	ctx := context.Background()
	long := ip.IDToken(map[string]any{"sub": "a", "exp": c.now().Add(2 * time.Hour).Unix()})
	short := ip.IDToken(map[string]any{"sub": "b", "exp": c.now().Add(5 * time.Minute).Unix()})
	for _, tok := range []string{long, short} {
		if _, _, err := s.AuthenticateBearer(ctx, tok); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.AuthenticateBearer(ctx, long); err != nil || s.cached() != 1 {
		t.Fatalf("second use: err %v, cache hits %d", err, s.cached())
	}
	c.add(6 * time.Minute)
	// Past its exp the short token is verified again, and refused.
	if _, _, err := s.AuthenticateBearer(ctx, short); !errors.Is(err, ErrRejected) {
		t.Fatalf("expired token: %v", err)
	}
	if _, _, err := s.AuthenticateBearer(ctx, long); err != nil || s.cached() != 2 {
		t.Fatalf("within 15 minutes: err %v, hits %d", err, s.cached())
	}
	c.add(10 * time.Minute)
	if _, _, err := s.AuthenticateBearer(ctx, long); err != nil || s.cached() != 2 {
		t.Fatalf("after 15 minutes the token is verified again: err %v, hits %d", err, s.cached())
	}
	// A rejection is cached 10 s.
	bad := ip.IDToken(map[string]any{"sub": "c", "aud": "nobody"})
	for range 2 {
		if _, _, err := s.AuthenticateBearer(ctx, bad); !errors.Is(err, ErrRejected) {
			t.Fatal(err)
		}
	}
	if s.cached() != 3 {
		t.Fatalf("rejection not cached: hits %d", s.cached())
	}
	c.add(11 * time.Second)
	if _, _, err := s.AuthenticateBearer(ctx, bad); !errors.Is(err, ErrRejected) || s.cached() != 3 {
		t.Fatalf("rejection after 10 s: %v, hits %d", err, s.cached())
	}
}

// TestDiscoveryOutage: while discovery fails, a token of the issuer is
// claimed and refused as an outage (not cached); discovery is retried
// every 10 s and the token is then accepted.
func TestDiscoveryOutage(t *testing.T) {
	c := newClock()
	ip := oidctest.New(t, "svc", "")
	ip.Now = c.now
	ip.Set(func(p *oidctest.Provider) { p.DiscoveryDown = true })
	s := testSet(t, ip, c)
	ctx := context.Background()
	tok := ip.IDToken(map[string]any{"sub": "a"})
	_, claimed, err := s.AuthenticateBearer(ctx, tok)
	if !claimed || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("claimed %v err %v", claimed, err)
	}
	if d := s.Diagnoses(ctx); len(d) != 1 || !strings.Contains(d[0], "discovery") {
		t.Fatalf("diagnoses %q", d)
	}
	ip.Set(func(p *oidctest.Provider) { p.DiscoveryDown = false })
	if _, _, err := s.AuthenticateBearer(ctx, tok); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("within 10 s discovery is not retried: %v", err)
	}
	c.add(11 * time.Second)
	if _, _, err := s.AuthenticateBearer(ctx, tok); err != nil {
		t.Fatalf("after rediscovery: %v", err)
	}
	if n := ip.Requests("/.well-known/openid-configuration"); n != 2 {
		t.Fatalf("%d discovery requests, want 2", n)
	}
	if d := s.Diagnoses(ctx); len(d) != 0 {
		t.Fatalf("diagnoses %q", d)
	}
}

func TestSecretDiagnosis(t *testing.T) {
	c := newClock()
	ip := oidctest.New(t, "svc", "")
	dir := t.TempDir()
	s := testSet(t, ip, c, func(sp *Spec) { sp.ClientSecretFile = filepath.Join(dir, "missing") })
	d := s.Diagnoses(context.Background())
	if len(d) != 1 || !strings.Contains(d[0], "client secret file") || !strings.Contains(d[0], "no such file") {
		t.Fatalf("diagnoses %q", d)
	}
	if err := os.WriteFile(filepath.Join(dir, "missing"), []byte("hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if d := s.Diagnoses(context.Background()); len(d) != 0 {
		t.Fatalf("diagnoses %q", d)
	}
	p := s.Get(context.Background(), "corp")
	if sec, err := p.secret(context.Background()); err != nil || sec != "hunter2" {
		t.Fatalf("secret %q %v", sec, err)
	}
	ref := testSet(t, ip, c, func(sp *Spec) { sp.ClientSecretRef = &SecretKeyRef{Name: "idp", Key: "secret"} })
	if d := ref.Diagnoses(context.Background()); len(d) != 1 || !strings.Contains(d[0], "kube store") {
		t.Fatalf("diagnoses %q", d)
	}
}

func TestDecodeSpecs(t *testing.T) {
	good := map[string]any{"id": "corp", "issuerURL": "https://idp.example", "clientID": "svc"}
	specs, err := DecodeSpecs([]map[string]any{good})
	if err != nil || len(specs) != 1 || specs[0].ID != "corp" {
		t.Fatalf("%v %v", specs, err)
	}
	with := func(k string, v any) map[string]any {
		m := map[string]any{}
		for a, b := range good {
			m[a] = b
		}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	for name, raw := range map[string][]map[string]any{
		"unknown key":    {with("clientSecret", "x")},
		"no id":          {with("id", nil)},
		"bad id":         {with("id", "Corp_1")},
		"http issuer":    {with("issuerURL", "http://idp.example")},
		"no client":      {with("clientID", nil)},
		"both secrets":   {with("clientSecretFile", "/f"), with("clientSecretRef", map[string]any{"name": "a", "key": "b"})},
		"duplicate id":   {good, with("issuerURL", "https://other.example")},
		"duplicate iss":  {good, with("id", "other")},
		"empty audience": {with("audiences", []any{""})},
	} {
		if name == "both secrets" {
			m := with("clientSecretFile", "/f")
			m["clientSecretRef"] = map[string]any{"name": "a", "key": "b"}
			raw = []map[string]any{m}
		}
		if _, err := DecodeSpecs(raw); err == nil || !strings.Contains(err.Error(), "auth.identityProviders[") {
			t.Errorf("%s: err %v", name, err)
		}
	}
}

func TestLoginStateCodec(t *testing.T) {
	c := newClock()
	key := make([]byte, 32)
	prev := make([]byte, 32)
	prev[0] = 1
	codec, err := NewStateCodec(key, nil, c.now)
	if err != nil {
		t.Fatal(err)
	}
	ls, err := NewLoginState("corp", "https://svc.example/api/v1/auth/oidc/corp/callback", "/", c.now())
	if err != nil {
		t.Fatal(err)
	}
	v, err := codec.Encode(ls)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := codec.Decode(v); err != nil || got != ls {
		t.Fatalf("%+v %v", got, err)
	}
	if strings.Contains(v, ls.Verifier) || strings.Contains(v, ls.Nonce) {
		t.Fatal("state cookie shows its secrets")
	}
	tampered := []byte(v)
	tampered[len(tampered)/2] ^= 1
	if _, err := codec.Decode(string(tampered)); !errors.Is(err, ErrLoginState) {
		t.Fatalf("tampered: %v", err)
	}
	// A rotated key still opens states sealed before the rotation.
	rotated, _ := NewStateCodec(prev, key, c.now)
	if _, err := rotated.Decode(v); err != nil {
		t.Fatalf("previous key: %v", err)
	}
	other, _ := NewStateCodec(prev, nil, c.now)
	if _, err := other.Decode(v); !errors.Is(err, ErrLoginState) {
		t.Fatalf("other key: %v", err)
	}
	c.add(LoginTTL)
	if _, err := codec.Decode(v); !errors.Is(err, ErrLoginState) {
		t.Fatalf("expired: %v", err)
	}
}
