package auth

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// Built-in role names.
const (
	RoleViewer    = "viewer"
	RoleAuditor   = "auditor"
	RoleOperator  = "operator"
	RoleZoneAdmin = "zone-admin"
	RoleAdmin     = "admin"
)

// Decision paths recorded in the audit trail.
const (
	PathLocal   = "local"
	PathBinding = "binding"
	PathSAR     = "sar"
	PathNone    = "none"
)

// Scope is where a grant applies: the whole cluster or one zone.
type Scope struct {
	Kind string `json:"kind"`           // "cluster" or "zone"
	Name string `json:"name,omitempty"` // zone name for kind zone
}

// ClusterScope covers everything.
var ClusterScope = Scope{Kind: "cluster"}

// ZoneScope returns the scope of one zone.
func ZoneScope(name string) Scope { return Scope{Kind: "zone", Name: name} }

func (s Scope) String() string {
	if s.Kind == "zone" {
		return "zone:" + s.Name
	}
	return "cluster"
}

// Covers reports whether a grant at s applies at t.
func (s Scope) Covers(t Scope) bool {
	return s.Kind == "cluster" || (s.Kind == t.Kind && s.Name == t.Name)
}

// ParseScope reads "cluster" or "zone:<name>".
func ParseScope(v string) (Scope, error) {
	switch {
	case v == "" || v == "cluster":
		return ClusterScope, nil
	case strings.HasPrefix(v, "zone:") && len(v) > len("zone:"):
		return ZoneScope(strings.TrimPrefix(v, "zone:")), nil
	}
	return Scope{}, fmt.Errorf("scope %q: want cluster or zone:<name>", v)
}

// Grant is a role held at a scope; wire form "<role>" or "<role>@zone:<name>".
type Grant struct {
	Role  string
	Scope Scope
}

func (g Grant) String() string {
	if g.Scope.Kind == "zone" {
		return g.Role + "@" + g.Scope.String()
	}
	return g.Role
}

// ParseGrant reads a grant in wire form.
func ParseGrant(v string) (Grant, error) {
	role, sc, _ := strings.Cut(v, "@")
	if _, ok := rolePermissions[role]; !ok {
		return Grant{}, fmt.Errorf("grant %q: unknown role %q", v, role)
	}
	s, err := ParseScope(sc)
	if err != nil {
		return Grant{}, fmt.Errorf("grant %q: %w", v, err)
	}
	if role != RoleZoneAdmin && s.Kind == "zone" {
		return Grant{}, fmt.Errorf("grant %q: only zone-admin can be scoped to a zone", v)
	}
	return Grant{Role: role, Scope: s}, nil
}

// Permissions every authenticated principal holds (implicit grants, path
// local). Token scopes narrow them too (scopedImplicit).
var implicitPermissions = []string{"self.read", "self.write", "tokens.own"}

// scopedImplicit are the implicit permissions a token with scopes keeps:
// self.read, so that a narrowed token still knows who it is (GET /auth/me,
// which `svc login --token` calls), and tokens.own, which the token routes
// narrow further to tokens no wider than the caller (CoversScopes). A
// scoped token never changes its owner's password (self.write).
var scopedImplicit = []string{"self.read", "tokens.own"}

// zonePermissions may be granted at zone scope; every other permission
// needs a cluster grant.
var zonePermissions = []string{
	"dnszones.read", "dnszones.write", "dnszones.delete",
	"dnsrecordsets.read", "dnsrecordsets.write", "dnsrecordsets.delete",
	"records.read", "records.write", "objects.apply",
}

var (
	viewerPerms = []string{
		"dnszones.read", "dnsrecordsets.read", "blocklists.read", "clientgroups.read",
		"policies.read", "unblockrequests.read", "records.read", "settings.read",
		"dns.query", "messages.read", "info.read",
	}
	auditorPerms  = []string{"querylogs.read", "audit.read"}
	operatorExtra = []string{
		"blocklists.write", "blocklists.delete", "clientgroups.write", "clientgroups.delete",
		"policies.write", "policies.delete", "unblockrequests.write", "unblockrequests.delete",
		"dns.blocking", "cache.flush", "objects.apply",
	}
	zoneAdminPerms = []string{
		"dnszones.read", "dnszones.write", "dnszones.delete",
		"dnsrecordsets.read", "dnsrecordsets.write", "dnsrecordsets.delete",
		"records.read", "records.write", "objects.apply", "dns.query",
	}
	adminExtra = []string{
		"users.read", "users.write", "serviceaccounts.read", "serviceaccounts.write", "serviceaccounts.delete",
		"rolebindings.read", "rolebindings.write", "rolebindings.delete",
		"identityproviders.read", "identityproviders.write", "identityproviders.delete",
		"users.delete", "tokens.read", "tokens.delete", "settings.write", "nodeconfig.write", "audit.read",
	}
	rolePermissions = map[string][]string{
		RoleViewer:    set(viewerPerms),
		RoleAuditor:   set(auditorPerms),
		RoleOperator:  set(viewerPerms, operatorExtra),
		RoleZoneAdmin: set(zoneAdminPerms),
		// admin holds everything except querylogs.read, which the auditor
		// role alone carries.
		RoleAdmin: set(viewerPerms, operatorExtra, zoneAdminPerms, adminExtra),
	}
)

func set(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		for _, p := range l {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	sort.Strings(out)
	return out
}

// Roles returns the built-in role names.
func Roles() []string {
	return []string{RoleViewer, RoleAuditor, RoleOperator, RoleZoneAdmin, RoleAdmin}
}

// RolePermissions returns a copy of a role's permissions (nil for an unknown role).
func RolePermissions(role string) []string { return slices.Clone(rolePermissions[role]) }

// AllPermissions lists every permission of every role plus the implicit ones.
func AllPermissions() []string {
	var all [][]string
	for _, r := range Roles() {
		all = append(all, rolePermissions[r])
	}
	return set(append(all, implicitPermissions)...)
}

// IsImplicit reports whether every authenticated principal holds perm.
func IsImplicit(perm string) bool { return slices.Contains(implicitPermissions, perm) }

// ZoneScopable reports whether perm can be granted at zone scope.
func ZoneScopable(perm string) bool { return slices.Contains(zonePermissions, perm) }

func roleHas(role, perm string, at, granted Scope) bool {
	if !slices.Contains(rolePermissions[role], perm) {
		return false
	}
	if granted.Kind == "zone" && !ZoneScopable(perm) {
		return false
	}
	return granted.Covers(at)
}

// Subject names who a binding applies to.
type Subject struct {
	Kind      string `json:"kind"` // User, Group, ServiceAccount
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
}

// Binding is a role granted to a subject at a scope.
type Binding struct {
	Name    string  `json:"name"`
	Source  string  `json:"source"` // config or object
	Subject Subject `json:"subject"`
	Role    string  `json:"role"`
	Scope   Scope   `json:"scope"`
	// Revision tells versions of a binding object apart (uid and
	// generation); empty for bindings of the rbac.bindings setting.
	Revision string `json:"-"`
}

// Fingerprint identifies this exact binding: name, source, subject, role,
// scope and revision. OIDC-login sessions record the fingerprints of the
// bindings that gave their frozen grants; any change to such a binding (or
// its removal, or its deletion and re-creation) changes or removes the
// fingerprint, so the grant is not honoured any more.
func (b Binding) Fingerprint() string {
	h := sha256.New()
	for _, v := range []string{b.Name, b.Source, b.Subject.Kind, b.Subject.Namespace, b.Subject.Name, b.Role, b.Scope.Kind, b.Scope.Name, b.Revision} {
		h.Write([]byte(v))
		h.Write([]byte{0})
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:12])
}

// ValidateBinding checks a binding; the error is reported as a diagnosis.
func ValidateBinding(b Binding) error {
	if _, ok := rolePermissions[b.Role]; !ok {
		return fmt.Errorf("unknown role %q", b.Role)
	}
	switch b.Subject.Kind {
	case "User", "Group":
	case "ServiceAccount":
		if b.Subject.Namespace == "" {
			return errors.New("ServiceAccount subject needs a namespace")
		}
	default:
		return fmt.Errorf("unknown subject kind %q", b.Subject.Kind)
	}
	if b.Subject.Name == "" {
		return errors.New("subject needs a name")
	}
	switch b.Scope.Kind {
	case "cluster":
	case "zone":
		if b.Scope.Name == "" {
			return errors.New("zone scope needs a name")
		}
		if b.Role != RoleZoneAdmin {
			return fmt.Errorf("role %s cannot be scoped to a zone", b.Role)
		}
	default:
		return fmt.Errorf("unknown scope kind %q", b.Scope.Kind)
	}
	return nil
}

// Principal is an authenticated caller.
type Principal struct {
	Kind       string // User or ServiceAccount
	ID         string
	Name       string
	Namespace  string // service accounts
	Groups     []string
	Provider   string // local, oidc id, kubernetes
	AuthMethod string // session, token, socket
	TokenID    string
	SessionID  string

	BuiltinAdmin       bool
	MustChangePassword bool
	// Scopes narrow a token; nil means not narrowed.
	Scopes         []Grant
	TokenExpiresAt *time.Time
	SessionExpires time.Time
	SessionIdle    time.Time
	// FrozenGrants are grants fixed at OIDC login; nil for local principals.
	FrozenGrants []Grant
	// FrozenBindings are the fingerprints of the bindings that gave
	// FrozenGrants at login. When set, only those bindings (unchanged) can
	// still provide a frozen grant: the principal carries no groups.
	FrozenBindings []string
	// ImplicitGrants are held without a binding (decision path local): the
	// Node principal of the internal token holds viewer and auditor.
	ImplicitGrants []Grant
	// External, when set, is consulted after built-in admin and implicit
	// grants and before bindings (Kubernetes identities: SubjectAccessReview,
	// decision path sar); the first allow wins.
	External func(ctx context.Context, perm string, at Scope) Decision `json:"-"`
}

// Matches reports whether a binding's subject is p.
func (p *Principal) Matches(s Subject) bool {
	switch s.Kind {
	case "User":
		return p.Kind == "User" && s.Name == p.Name
	case "Group":
		return slices.Contains(p.Groups, s.Name)
	case "ServiceAccount":
		return p.Kind == "ServiceAccount" && s.Name == p.Name && s.Namespace == p.Namespace
	}
	return false
}

// Decision is the outcome of one authorization.
type Decision struct {
	Allowed bool
	Path    string
	Missing string // the permission refused
}

// BindingSource returns the current bindings (config and objects) and the
// diagnoses of bindings it ignored.
type BindingSource func(ctx context.Context) ([]Binding, []string, error)

// Authorizer evaluates permissions in the spec's order: token scopes narrow;
// built-in admin (local); implicit grants (local); bindings (binding).
type Authorizer struct {
	bindings BindingSource
}

// NewAuthorizer returns an Authorizer reading bindings from src.
func NewAuthorizer(src BindingSource) *Authorizer { return &Authorizer{bindings: src} }

// Authorize decides whether p holds perm at scope.
func (a *Authorizer) Authorize(ctx context.Context, p *Principal, perm string, at Scope) Decision {
	deny := Decision{Path: PathNone, Missing: perm}
	if p == nil {
		return deny
	}
	// Token scopes narrow everything, implicit grants included.
	if IsImplicit(perm) {
		if p.Scopes != nil && !slices.Contains(scopedImplicit, perm) {
			return deny
		}
		return Decision{Allowed: true, Path: PathLocal}
	}
	if p.Scopes != nil && !grantsCover(p.Scopes, perm, at) {
		return deny
	}
	if p.BuiltinAdmin {
		return Decision{Allowed: true, Path: PathLocal}
	}
	if grantsCover(p.ImplicitGrants, perm, at) {
		return Decision{Allowed: true, Path: PathLocal}
	}
	if p.External != nil {
		if d := p.External(ctx, perm, at); d.Allowed {
			return d
		}
	}
	grants, err := a.Grants(ctx, p)
	if err != nil {
		return deny
	}
	if grantsCover(grants, perm, at) {
		return Decision{Allowed: true, Path: PathBinding}
	}
	return deny
}

func grantsCover(gs []Grant, perm string, at Scope) bool {
	for _, g := range gs {
		if roleHas(g.Role, perm, at, g.Scope) {
			return true
		}
	}
	return false
}

// Grants returns the grants bindings give p (not narrowed by token scopes).
func (a *Authorizer) Grants(ctx context.Context, p *Principal) ([]Grant, error) {
	if p.BuiltinAdmin {
		// The built-in administrator is allowed every permission (Authorize),
		// querylogs.read included: its grants say so, so that it can hand
		// out an auditor token (svc token create --role viewer,auditor) and
		// /auth/me shows what it holds.
		return []Grant{{Role: RoleAdmin, Scope: ClusterScope}, {Role: RoleAuditor, Scope: ClusterScope}}, nil
	}
	bs, _, err := a.bindings(ctx)
	if err != nil {
		return nil, fmt.Errorf("read role bindings: %w", err)
	}
	var out []Grant
	for _, b := range bs {
		match := p.Matches(b.Subject)
		if p.FrozenGrants != nil && p.FrozenBindings != nil {
			// OIDC-login sessions: only the very bindings that gave the
			// grants at login count, unchanged since.
			match = slices.Contains(p.FrozenBindings, b.Fingerprint())
		}
		if match {
			g := Grant{Role: b.Role, Scope: b.Scope}
			if !slices.Contains(out, g) {
				out = append(out, g)
			}
		}
	}
	if p.FrozenGrants != nil {
		// OIDC sessions: frozen grants count only while a live binding still
		// provides them.
		var kept []Grant
		for _, g := range p.FrozenGrants {
			if slices.Contains(out, g) {
				kept = append(kept, g)
			}
		}
		out = kept
	}
	for _, g := range p.ImplicitGrants {
		if !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	return out, nil
}

// Freeze returns the grants bindings give p now (p's user name and groups)
// and the fingerprints of the bindings that give them, for an OIDC-login
// session or an OIDC owner's token, whose grants are frozen at issue. When p
// is itself frozen (an OIDC-login session creating a token), only its own
// bindings that are still unchanged count: freezing never widens.
func (a *Authorizer) Freeze(ctx context.Context, p *Principal) ([]Grant, []string, error) {
	bs, _, err := a.bindings(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("read role bindings: %w", err)
	}
	grants, prints := []Grant{}, []string{}
	for _, b := range bs {
		match := p.Matches(b.Subject)
		if p.FrozenGrants != nil && p.FrozenBindings != nil {
			match = slices.Contains(p.FrozenBindings, b.Fingerprint()) && slices.Contains(p.FrozenGrants, Grant{Role: b.Role, Scope: b.Scope})
		}
		if !match {
			continue
		}
		if g := (Grant{Role: b.Role, Scope: b.Scope}); !slices.Contains(grants, g) {
			grants = append(grants, g)
		}
		if f := b.Fingerprint(); !slices.Contains(prints, f) {
			prints = append(prints, f)
		}
	}
	return grants, prints, nil
}

// EffectiveGrants returns the grants after token narrowing.
func (a *Authorizer) EffectiveGrants(ctx context.Context, p *Principal) ([]Grant, error) {
	gs, err := a.Grants(ctx, p)
	if err != nil || p.Scopes == nil {
		return gs, err
	}
	var out []Grant
	for _, s := range p.Scopes {
		// A scope grant survives only when the owner holds all of it.
		if covered(gs, s) {
			out = append(out, s)
		}
	}
	return out, nil
}

func covered(held []Grant, g Grant) bool {
	for _, perm := range rolePermissions[g.Role] {
		if g.Scope.Kind == "zone" && !ZoneScopable(perm) {
			continue
		}
		if !grantsCover(held, perm, g.Scope) {
			return false
		}
	}
	return true
}

// CoversScopes reports whether a token with scopes is no wider than
// caller: it has scopes (none means all of its owner's grants) and caller
// holds every permission of each. A scoped token sees and revokes only such
// tokens of its owner.
func CoversScopes(caller []Grant, scopes []string) bool {
	if len(scopes) == 0 {
		return false
	}
	for _, sc := range scopes {
		g, err := ParseGrant(sc)
		if err != nil {
			continue // an unreadable scope grants nothing
		}
		if !covered(caller, g) {
			return false
		}
	}
	return true
}

// CanGrant reports whether p may hand out g (for token scopes): p must hold
// every permission g carries, after its own narrowing.
func (a *Authorizer) CanGrant(ctx context.Context, p *Principal, g Grant) bool {
	gs, err := a.EffectiveGrants(ctx, p)
	if err != nil {
		return false
	}
	return covered(gs, g)
}

// Permissions summarises p's permissions for /auth/me: resource to verbs at
// cluster scope, and per zone scope.
func (a *Authorizer) Permissions(ctx context.Context, p *Principal) (cluster map[string][]string, zones map[string]map[string][]string) {
	cluster = map[string][]string{}
	zones = map[string]map[string][]string{}
	gs, _ := a.EffectiveGrants(ctx, p)
	add := func(m map[string][]string, perm string) {
		res, verb, _ := strings.Cut(perm, ".")
		if !slices.Contains(m[res], verb) {
			m[res] = append(m[res], verb)
			sort.Strings(m[res])
		}
	}
	for _, perm := range implicitPermissions {
		if p.Scopes == nil || slices.Contains(scopedImplicit, perm) {
			add(cluster, perm)
		}
	}
	for _, g := range gs {
		for _, perm := range rolePermissions[g.Role] {
			if g.Scope.Kind == "cluster" {
				add(cluster, perm)
			} else if ZoneScopable(perm) {
				k := g.Scope.String()
				if zones[k] == nil {
					zones[k] = map[string][]string{}
				}
				add(zones[k], perm)
			}
		}
	}
	return cluster, zones
}

// AllowedZones reports where p holds perm: everywhere (cluster) or in the
// listed zones only.
func (a *Authorizer) AllowedZones(ctx context.Context, p *Principal, perm string) (cluster bool, zones []string) {
	if a.Authorize(ctx, p, perm, ClusterScope).Allowed {
		return true, nil
	}
	gs, _ := a.EffectiveGrants(ctx, p)
	for _, g := range gs {
		if g.Scope.Kind == "zone" && roleHas(g.Role, perm, g.Scope, g.Scope) && !slices.Contains(zones, g.Scope.Name) {
			zones = append(zones, g.Scope.Name)
		}
	}
	return false, zones
}
