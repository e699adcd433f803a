// Package oidc authenticates people through OpenID Connect identity
// providers: bearer ID tokens of a configured provider (verified against the
// provider's discovery document and key set, verdicts cached), and the
// browser login (authorization-code flow with PKCE run by the server, whose
// result the REST API turns into a session cookie with frozen grants).
//
// Providers come from the auth.identityProviders setting (IdentityProvider
// spec plus id, decoded strictly by DecodeSpecs) and, when the REST API
// supplies a source, from IdentityProvider objects.
package oidc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/svcdns/svc/api/v1alpha1/iam"
)

// Spec is one provider's settings: the IdentityProvider spec (with id).
type Spec = iam.IdentityProviderSpec

// SecretKeyRef names a key of a Secret holding a client secret.
type SecretKeyRef = iam.SecretKeyRef

// Defaults of a provider's settings.
const (
	DefaultUsernameClaim = "sub"
	DefaultGroupsClaim   = "groups"
)

// DefaultScopes are requested at login when a provider names none.
var DefaultScopes = []string{"openid", "profile", "email"}

var idPattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)

// DecodeSpecs decodes the auth.identityProviders setting strictly: an
// unknown key, a missing id, issuer or client id, a duplicate id or issuer
// is an error naming the item.
func DecodeSpecs(raw []map[string]any) ([]Spec, error) {
	out := make([]Spec, 0, len(raw))
	ids, issuers := map[string]int{}, map[string]int{}
	for i, m := range raw {
		b, err := json.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("auth.identityProviders[%d]: %w", i, err)
		}
		var s Spec
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil {
			return nil, fmt.Errorf("auth.identityProviders[%d]: %w", i, err)
		}
		if err := Validate(s); err != nil {
			return nil, fmt.Errorf("auth.identityProviders[%d]: %w", i, err)
		}
		if j, dup := ids[s.ID]; dup {
			return nil, fmt.Errorf("auth.identityProviders[%d]: id %q is also used by item %d", i, s.ID, j)
		}
		if j, dup := issuers[s.IssuerURL]; dup {
			return nil, fmt.Errorf("auth.identityProviders[%d]: issuerURL %q is also used by item %d (tokens are routed by issuer)", i, s.IssuerURL, j)
		}
		ids[s.ID], issuers[s.IssuerURL] = i, i
		out = append(out, s)
	}
	return out, nil
}

// Validate checks one provider's settings (the rules of the IdentityProvider
// kind).
func Validate(s Spec) error {
	if !idPattern.MatchString(s.ID) || len(s.ID) > 63 {
		return fmt.Errorf("id %q: want 1 to 63 lower-case letters, digits and inner dashes", s.ID)
	}
	if len(s.DisplayName) > 100 {
		return errors.New("displayName: at most 100 characters")
	}
	u, err := url.Parse(s.IssuerURL)
	if err != nil || u.Scheme != "https" || u.Host == "" || len(s.IssuerURL) > 2048 || strings.ContainsAny(s.IssuerURL, " \t\r\n") {
		return fmt.Errorf("issuerURL %q: want an https URL (it must equal the tokens' iss claim)", s.IssuerURL)
	}
	if s.ClientID == "" || len(s.ClientID) > 512 {
		return errors.New("clientID: required, at most 512 characters")
	}
	if s.ClientSecretFile != "" && s.ClientSecretRef != nil {
		return errors.New("clientSecretFile and clientSecretRef exclude each other")
	}
	if r := s.ClientSecretRef; r != nil && (r.Name == "" || r.Key == "") {
		return errors.New("clientSecretRef: name and key are required")
	}
	if len(s.Audiences) > 16 {
		return errors.New("audiences: at most 16")
	}
	for _, a := range s.Audiences {
		if a == "" {
			return errors.New("audiences: empty audience")
		}
	}
	if len(s.Scopes) > 32 {
		return errors.New("scopes: at most 32")
	}
	for _, p := range []*string{s.UsernamePrefix, s.GroupsPrefix} {
		if p != nil && len(*p) > 63 {
			return errors.New("usernamePrefix and groupsPrefix: at most 63 characters")
		}
	}
	return nil
}

// settings are a spec with its defaults applied.
type settings struct {
	Spec
	usernamePrefix, groupsPrefix string
	usernameClaim, groupsClaim   string
	scopes                       []string
}

func resolve(s Spec) settings {
	r := settings{Spec: s, usernamePrefix: s.ID + ":", groupsPrefix: s.ID + ":",
		usernameClaim: s.UsernameClaim, groupsClaim: s.GroupsClaim, scopes: s.Scopes}
	if s.UsernamePrefix != nil {
		r.usernamePrefix = *s.UsernamePrefix
	}
	if s.GroupsPrefix != nil {
		r.groupsPrefix = *s.GroupsPrefix
	}
	if r.usernameClaim == "" {
		r.usernameClaim = DefaultUsernameClaim
	}
	if r.groupsClaim == "" {
		r.groupsClaim = DefaultGroupsClaim
	}
	if len(r.scopes) == 0 {
		r.scopes = DefaultScopes
	}
	hasOpenID := false
	for _, sc := range r.scopes {
		hasOpenID = hasOpenID || sc == "openid"
	}
	if !hasOpenID {
		r.scopes = append([]string{"openid"}, r.scopes...)
	}
	return r
}

// DisplayName is the name shown on the login page (the id when empty).
func (s settings) displayName() string {
	if s.DisplayName != "" {
		return s.DisplayName
	}
	return s.ID
}
