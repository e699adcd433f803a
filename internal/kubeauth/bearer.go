package kubeauth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"

	"github.com/svcdns/svc/internal/auth"
)

// Bearer is the REST API's authenticator for Kubernetes ServiceAccount
// tokens (an api.BearerAuthenticator). It claims a JWT whose iss is the
// cluster's service account issuer (or, while discovery fails, a JWT carrying
// the kubernetes.io claim), verifies it, and returns a ServiceAccount
// principal that the Authorizer, when set, authorizes through
// SubjectAccessReview (decision path sar) before role bindings are consulted.
type Bearer struct {
	Verifier   *Verifier
	Authorizer *Authorizer // nil: bindings only
}

// AuthenticateBearer implements api.BearerAuthenticator.
func (b *Bearer) AuthenticateBearer(ctx context.Context, token string) (*auth.Principal, bool, error) {
	claims, ok := jwtClaims(token)
	if !ok {
		return nil, false, nil
	}
	iss, _ := claims["iss"].(string)
	_, kubeClaim := claims["kubernetes.io"]
	issuer := b.Verifier.Issuer(ctx)
	switch {
	case issuer != "" && iss == issuer:
	case issuer == "" && kubeClaim:
	default:
		return nil, false, nil
	}
	id, err := b.Verifier.Verify(ctx, token)
	if err != nil {
		return nil, true, err
	}
	return b.Principal(id), true, nil
}

// Principal is the API principal of a verified identity.
func (b *Bearer) Principal(id Identity) *auth.Principal {
	p := &auth.Principal{
		Kind: "ServiceAccount", ID: id.Username, Name: id.Name, Namespace: id.Namespace,
		Groups: id.Groups, Provider: "kubernetes", AuthMethod: "token",
	}
	if p.Name == "" { // not a service account: a user token from TokenReview
		p.Kind, p.Name = "User", id.Username
	}
	if az := b.Authorizer; az != nil {
		p.External = func(ctx context.Context, perm string, at auth.Scope) auth.Decision {
			zone := ""
			if at.Kind == "zone" {
				zone = at.Name
			}
			d := az.Authorize(ctx, id, perm, zone)
			if !d.Allowed {
				return auth.Decision{Path: auth.PathNone, Missing: perm}
			}
			return auth.Decision{Allowed: true, Path: auth.PathSAR}
		}
	}
	return p
}

// jwtClaims decodes the payload of a compact JWT without verifying it (only
// to route the token to its verifier).
func jwtClaims(token string) (map[string]any, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return nil, false
	}
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return nil, false
	}
	return m, true
}
