package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/svcdns/svc/internal/store"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Internal kinds kept in the store (never CRDs; Secrets in Kubernetes).
const (
	KindLocalUser      = "LocalUser"
	KindAPIToken       = "APIToken"
	KindServiceAccount = "ServiceAccount"
	KindRoleBinding    = "RoleBinding"
	KindIdentityProv   = "IdentityProvider"
	APIVersion         = "service.io/v1alpha1"
)

// LocalUser is a local account.
type LocalUser struct {
	Username           string
	DisplayName        string
	PasswordHash       string
	Disabled           bool
	BuiltinAdmin       bool
	Groups             []string
	MustChangePassword bool
	SessionsValidAfter time.Time
	PasswordChangedAt  time.Time
	LastLoginAt        time.Time
	obj                *unstructured.Unstructured
}

// Directory reads and writes the internal kinds. LocalUser and APIToken are
// cluster-scoped; built-in service accounts live in the service's namespace.
type Directory struct {
	st store.Store
	ns string
}

// NewDirectory returns a Directory for internal objects kept in namespace ns.
func NewDirectory(st store.Store, ns string) *Directory { return &Directory{st: st, ns: ns} }

// Namespace is where internal objects live.
func (d *Directory) Namespace() string { return d.ns }

func str(o map[string]any, path ...string) string {
	v, _, _ := unstructured.NestedString(o, path...)
	return v
}

func boolean(o map[string]any, path ...string) bool {
	v, _, _ := unstructured.NestedBool(o, path...)
	return v
}

func tm(o map[string]any, path ...string) time.Time {
	t, _ := time.Parse(time.RFC3339, str(o, path...))
	return t
}

func setTime(o map[string]any, t time.Time, path ...string) {
	if t.IsZero() {
		unstructured.RemoveNestedField(o, path...)
		return
	}
	_ = unstructured.SetNestedField(o, t.UTC().Format(time.RFC3339), path...)
}

func userFrom(obj *unstructured.Unstructured) *LocalUser {
	o := obj.Object
	groups, _, _ := unstructured.NestedStringSlice(o, "spec", "groups")
	name := str(o, "spec", "username")
	if name == "" {
		name = obj.GetName()
	}
	return &LocalUser{
		Username: name, DisplayName: str(o, "spec", "displayName"),
		PasswordHash: str(o, "spec", "passwordHash"), Disabled: boolean(o, "spec", "disabled"),
		BuiltinAdmin: boolean(o, "spec", "builtinAdmin"), Groups: groups,
		MustChangePassword: boolean(o, "spec", "mustChangePassword"),
		SessionsValidAfter: tm(o, "spec", "sessionsValidAfter"),
		PasswordChangedAt:  tm(o, "spec", "passwordChangedAt"),
		LastLoginAt:        tm(o, "status", "lastLoginAt"),
		obj:                obj,
	}
}

// GetUser returns a local user or store.ErrNotFound.
func (d *Directory) GetUser(ctx context.Context, username string) (*LocalUser, error) {
	if username == "" || len(username) > 253 {
		return nil, store.ErrNotFound
	}
	obj, err := d.st.Get(ctx, KindLocalUser, "", UserObjectName(username))
	if err != nil {
		return nil, err
	}
	return userFrom(obj), nil
}

// UserObjectName is the name of the LocalUser object of username: the
// username itself when it is a valid object name (lowercase DNS subdomain),
// else "user-" and 40 hex digits of its SHA-256, so that names people type
// (capitals, @, _) can be stored; spec.username keeps the name as typed.
func UserObjectName(username string) string {
	if len(validation.IsDNS1123Subdomain(username)) == 0 {
		return username
	}
	sum := sha256.Sum256([]byte(username))
	return "user-" + hex.EncodeToString(sum[:20])
}

// ListUsers returns every local user.
func (d *Directory) ListUsers(ctx context.Context) ([]*LocalUser, error) {
	objs, err := listAll(ctx, d.st, KindLocalUser, "")
	if err != nil {
		return nil, err
	}
	out := make([]*LocalUser, 0, len(objs))
	for _, o := range objs {
		out = append(out, userFrom(o))
	}
	return out, nil
}

func listAll(ctx context.Context, st store.Store, kind, ns string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	cont := ""
	for range 10000 {
		res, err := st.List(ctx, store.ListOptions{Kind: kind, Namespace: ns, Limit: 500, Continue: cont})
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", kind, err)
		}
		out = append(out, res.Items...)
		if res.Continue == "" {
			return out, nil
		}
		cont = res.Continue
	}
	return out, nil
}

// SaveUser writes u. An existing object is written back by its own manager
// under its resourceVersion so that a concurrent change fails instead of
// being overwritten; a new one is created by manager.
func (d *Directory) SaveUser(ctx context.Context, u *LocalUser, manager store.Manager) (*LocalUser, error) {
	obj := &unstructured.Unstructured{Object: map[string]any{}}
	opts := store.ApplyOptions{Manager: manager}
	if u.obj != nil {
		obj = u.obj.DeepCopy()
		opts.Manager = store.OwnerOf(u.obj)
		opts.ResourceVersion = u.obj.GetResourceVersion()
	}
	obj.SetAPIVersion(APIVersion)
	obj.SetKind(KindLocalUser)
	if u.obj == nil {
		obj.SetName(UserObjectName(u.Username))
	}
	o := obj.Object
	spec := map[string]any{"username": u.Username, "passwordHash": u.PasswordHash}
	if u.DisplayName != "" {
		spec["displayName"] = u.DisplayName
	}
	if u.Disabled {
		spec["disabled"] = true
	}
	if u.BuiltinAdmin {
		spec["builtinAdmin"] = true
	}
	if u.MustChangePassword {
		spec["mustChangePassword"] = true
	}
	if len(u.Groups) > 0 {
		gs := make([]any, len(u.Groups))
		for i, g := range u.Groups {
			gs[i] = g
		}
		spec["groups"] = gs
	}
	o["spec"] = spec
	setTime(o, u.SessionsValidAfter, "spec", "sessionsValidAfter")
	setTime(o, u.PasswordChangedAt, "spec", "passwordChangedAt")
	res, err := d.st.Apply(ctx, obj, opts)
	if err != nil {
		return nil, fmt.Errorf("save user %s: %w", u.Username, err)
	}
	return userFrom(res.Object), nil
}

// RecordLogin writes status.lastLoginAt.
func (d *Directory) RecordLogin(ctx context.Context, u *LocalUser, at time.Time) error {
	if u.obj == nil {
		return nil
	}
	obj := u.obj.DeepCopy()
	setTime(obj.Object, at, "status", "lastLoginAt")
	if _, err := d.st.UpdateStatus(ctx, obj); err != nil {
		return fmt.Errorf("record login of %s: %w", u.Username, err)
	}
	return nil
}

// TokenOwner names who a token acts as.
type TokenOwner struct {
	Kind      string `json:"kind"` // User or ServiceAccount
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	ID        string `json:"id,omitempty"`
	Provider  string `json:"provider,omitempty"`
}

// Token is a stored API token (its hash only).
type Token struct {
	ID          string
	Hash        string
	Owner       TokenOwner
	Description string
	Scopes      []string
	CreatedAt   time.Time
	ExpiresAt   *time.Time
	LastUsedAt  *time.Time
	LastUsedIP  string
	// FrozenGrants and FrozenBindings are set on tokens of OIDC owners: the
	// owner's grants when the token was issued and the fingerprints of the
	// bindings that gave them (Binding.Fingerprint).
	FrozenGrants   []string
	FrozenBindings []string
	obj            *unstructured.Unstructured
}

func tokenFrom(obj *unstructured.Unstructured) *Token {
	o := obj.Object
	scopes, _, _ := unstructured.NestedStringSlice(o, "spec", "scopes")
	frozen, _, _ := unstructured.NestedStringSlice(o, "spec", "frozenGrants")
	prints, _, _ := unstructured.NestedStringSlice(o, "spec", "frozenBindings")
	t := &Token{
		FrozenGrants: frozen, FrozenBindings: prints,
		ID: obj.GetName(), Hash: str(o, "spec", "hash"), Description: str(o, "spec", "description"),
		Scopes: scopes, CreatedAt: tm(o, "spec", "createdAt"), LastUsedIP: str(o, "status", "lastUsedIP"),
		Owner: TokenOwner{
			Kind: str(o, "spec", "owner", "kind"), Name: str(o, "spec", "owner", "name"),
			Namespace: str(o, "spec", "owner", "namespace"), Provider: str(o, "spec", "owner", "provider"),
			ID: str(o, "spec", "owner", "id"),
		},
		obj: obj,
	}
	if e := tm(o, "spec", "expiresAt"); !e.IsZero() {
		t.ExpiresAt = &e
	}
	if u := tm(o, "status", "lastUsedAt"); !u.IsZero() {
		t.LastUsedAt = &u
	}
	return t
}

// GetToken returns a token by id or store.ErrNotFound.
func (d *Directory) GetToken(ctx context.Context, id string) (*Token, error) {
	obj, err := d.st.Get(ctx, KindAPIToken, "", id)
	if err != nil {
		return nil, err
	}
	return tokenFrom(obj), nil
}

// ListTokens returns every token.
func (d *Directory) ListTokens(ctx context.Context) ([]*Token, error) {
	objs, err := listAll(ctx, d.st, KindAPIToken, "")
	if err != nil {
		return nil, err
	}
	out := make([]*Token, 0, len(objs))
	for _, o := range objs {
		out = append(out, tokenFrom(o))
	}
	return out, nil
}

// CreateToken stores a new token record.
func (d *Directory) CreateToken(ctx context.Context, t *Token, manager store.Manager) (*Token, error) {
	obj := &unstructured.Unstructured{Object: map[string]any{}}
	obj.SetAPIVersion(APIVersion)
	obj.SetKind(KindAPIToken)
	obj.SetName(t.ID)
	owner := map[string]any{"kind": t.Owner.Kind, "name": t.Owner.Name}
	if t.Owner.Namespace != "" {
		owner["namespace"] = t.Owner.Namespace
	}
	if t.Owner.Provider != "" {
		owner["provider"] = t.Owner.Provider
	}
	if t.Owner.ID != "" {
		owner["id"] = t.Owner.ID
	}
	spec := map[string]any{"id": t.ID, "hash": t.Hash, "owner": owner, "createdAt": t.CreatedAt.UTC().Format(time.RFC3339)}
	if t.Description != "" {
		spec["description"] = t.Description
	}
	if len(t.Scopes) > 0 {
		spec["scopes"] = anySlice(t.Scopes)
	}
	if t.FrozenGrants != nil {
		// Present even when empty: the token is frozen to no grants.
		spec["frozenGrants"] = anySlice(t.FrozenGrants)
		spec["frozenBindings"] = anySlice(t.FrozenBindings)
	}
	if t.ExpiresAt != nil {
		spec["expiresAt"] = t.ExpiresAt.UTC().Format(time.RFC3339)
	}
	obj.Object["spec"] = spec
	res, err := d.st.Apply(ctx, obj, store.ApplyOptions{Manager: manager})
	if err != nil {
		return nil, fmt.Errorf("save token: %w", err)
	}
	if res.Result != store.Created {
		return nil, fmt.Errorf("save token %s: %w", t.ID, store.ErrConflict)
	}
	return tokenFrom(res.Object), nil
}

func anySlice(v []string) []any {
	out := make([]any, len(v))
	for i, s := range v {
		out[i] = s
	}
	return out
}

// DeleteUser removes a local user, written by the object's own manager.
func (d *Directory) DeleteUser(ctx context.Context, u *LocalUser) error {
	m, name := store.ManagerAPI, UserObjectName(u.Username)
	if u.obj != nil {
		m, name = store.OwnerOf(u.obj), u.obj.GetName()
	}
	if err := d.st.Delete(ctx, KindLocalUser, "", name, store.DeleteOptions{Manager: m}); err != nil {
		return fmt.Errorf("delete user %s: %w", u.Username, err)
	}
	return nil
}

// DeleteToken removes a token.
func (d *Directory) DeleteToken(ctx context.Context, t *Token) error {
	m := store.ManagerAPI
	if t.obj != nil {
		m = store.OwnerOf(t.obj)
	}
	return d.st.Delete(ctx, KindAPIToken, "", t.ID, store.DeleteOptions{Manager: m})
}

// TouchToken writes lastUsedAt and lastUsedIP.
func (d *Directory) TouchToken(ctx context.Context, t *Token, at time.Time, ip string) error {
	if t.obj == nil {
		return nil
	}
	obj := t.obj.DeepCopy()
	setTime(obj.Object, at, "status", "lastUsedAt")
	_ = unstructured.SetNestedField(obj.Object, ip, "status", "lastUsedIP")
	_, err := d.st.UpdateStatus(ctx, obj)
	return err
}

// ServiceAccount is a non-human owner of tokens.
type ServiceAccount struct {
	Namespace, Name string
	Disabled        bool
	BuiltinAdmin    bool
	Groups          []string
}

// GetServiceAccount returns a service account or store.ErrNotFound.
func (d *Directory) GetServiceAccount(ctx context.Context, ns, name string) (*ServiceAccount, error) {
	obj, err := d.st.Get(ctx, KindServiceAccount, ns, name)
	if err != nil {
		return nil, err
	}
	groups, _, _ := unstructured.NestedStringSlice(obj.Object, "spec", "groups")
	// The built-in accounts (bootstrap, break-glass) of the service's own
	// namespace act as the built-in administrator.
	builtin := ns == d.ns && (name == BootstrapServiceAccount || name == BreakGlassServiceAccount)
	return &ServiceAccount{Namespace: ns, Name: name, Disabled: boolean(obj.Object, "spec", "disabled"),
		BuiltinAdmin: builtin, Groups: groups}, nil
}

// EnsureBuiltinServiceAccount creates a built-in administrator service
// account (bootstrap, break-glass) when missing.
func (d *Directory) EnsureBuiltinServiceAccount(ctx context.Context, name string, manager store.Manager) error {
	if _, err := d.GetServiceAccount(ctx, d.ns, name); err == nil {
		return nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": APIVersion, "kind": KindServiceAccount,
		"metadata": map[string]any{"name": name, "namespace": d.ns},
		"spec":     map[string]any{"description": "built-in service account"},
	}}
	_, err := d.st.Apply(ctx, obj, store.ApplyOptions{Manager: manager})
	var mb *store.ManagedByError
	if errors.As(err, &mb) {
		return nil // another replica created it first
	}
	if err != nil {
		return fmt.Errorf("create service account %s: %w", name, err)
	}
	return nil
}
