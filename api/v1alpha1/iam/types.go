package iam

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SensitiveFields lists, per kind, the field paths that hold secrets (hashes)
// and are never returned by the API, exported or logged.
func SensitiveFields(kind string) [][]string {
	switch kind {
	case "LocalUser":
		return [][]string{{"spec", "passwordHash"}}
	case "APIToken":
		return [][]string{{"spec", "hash"}}
	}
	return nil
}

// LocalUser is an account that logs in with a password. The object's name is
// derived from the username by the service; spec.username is what people type.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,path=localusers
// +kubebuilder:subresource:status
type LocalUser struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   LocalUserSpec   `json:"spec"`
	Status LocalUserStatus `json:"status,omitempty"`
}

// LocalUserSpec is the account.
type LocalUserSpec struct {
	// Username is the login name: no spaces, colons or slashes.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[^\s:/]+$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.username is immutable"
	Username string `json:"username"`
	// +optional
	// +kubebuilder:validation:MaxLength=256
	DisplayName string `json:"displayName,omitempty"`
	// PasswordHash is the Argon2id hash in PHC string form. Sensitive: never
	// returned by the API. Empty means the account cannot log in with a password.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^$|^\$argon2id\$`
	PasswordHash string `json:"passwordHash,omitempty"`
	// Disabled accounts cannot log in; their sessions and tokens answer 401.
	// +optional
	Disabled bool `json:"disabled,omitempty"`
	// BuiltinAdmin marks the bootstrap administrator, allowed everything.
	// +optional
	BuiltinAdmin bool `json:"builtinAdmin,omitempty"`
	// Groups the user belongs to, for role bindings with subject kind Group.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	Groups []string `json:"groups,omitempty"`
	// MustChangePassword limits the user to self-service routes until the
	// password is changed.
	// +optional
	MustChangePassword bool `json:"mustChangePassword,omitempty"`
	// SessionsValidAfter revokes every session issued at or before this time.
	// +optional
	SessionsValidAfter *metav1.Time `json:"sessionsValidAfter,omitempty"`
	// PasswordChangedAt is when passwordHash was last set.
	// +optional
	PasswordChangedAt *metav1.Time `json:"passwordChangedAt,omitempty"`
}

// LocalUserStatus is written on login.
type LocalUserStatus struct {
	// +optional
	LastLoginAt *metav1.Time `json:"lastLoginAt,omitempty"`
}

// +kubebuilder:object:root=true

// LocalUserList is a list of LocalUser.
type LocalUserList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LocalUser `json:"items"`
}

// APIToken is a stored API token: only the hash of the wire form
// svc_<id>_<secret> is kept. The object's name is the token id.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,path=apitokens
// +kubebuilder:subresource:status
// +kubebuilder:validation:XValidation:rule="self.metadata.name == self.spec.id",message="metadata.name must equal spec.id"
type APIToken struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   APITokenSpec   `json:"spec"`
	Status APITokenStatus `json:"status,omitempty"`
}

// APITokenSpec is the token record. Everything but description is immutable.
// +kubebuilder:validation:XValidation:rule="!has(self.expiresAt) || !has(self.createdAt) || self.expiresAt > self.createdAt",message="expiresAt must be after createdAt",fieldPath=".expiresAt"
type APITokenSpec struct {
	// ID is the 12-character id of the wire form.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]{12}$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.id is immutable"
	ID string `json:"id"`
	// Hash is hex(sha256(token)). Sensitive: never returned by the API.
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.hash is immutable"
	Hash string `json:"hash"`
	// Owner is who the token acts as.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.owner is immutable"
	Owner TokenOwner `json:"owner"`
	// +optional
	// +kubebuilder:validation:MaxLength=300
	Description string `json:"description,omitempty"`
	// Scopes narrow the token to these grants in wire form: a role name
	// (optionally "@cluster") or "zone-admin@zone:<name>". Empty keeps the
	// owner's grants.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:Pattern=`^((viewer|auditor|operator|zone-admin|admin)(@cluster)?|zone-admin@zone:\S+)$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.scopes is immutable"
	Scopes []string `json:"scopes,omitempty"`
	// FrozenGrants are, on a token of an OIDC owner, the owner's grants when
	// the token was created (wire form as in scopes). They are honoured only
	// while a binding of FrozenBindings still gives them.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:Pattern=`^((viewer|auditor|operator|zone-admin|admin)(@cluster)?|zone-admin@zone:\S+)$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.frozenGrants is immutable"
	FrozenGrants []string `json:"frozenGrants,omitempty"`
	// FrozenBindings are the fingerprints of the role bindings that gave
	// FrozenGrants; a binding changed or removed since gives nothing.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z0-9_-]{16}$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.frozenBindings is immutable"
	FrozenBindings []string `json:"frozenBindings,omitempty"`
	// +optional
	CreatedAt *metav1.Time `json:"createdAt,omitempty"`
	// ExpiresAt omitted means the token never expires.
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`
}

// TokenOwner is who a token acts as: a local user, an OIDC user (provider set;
// its grants frozen at creation) or a service account (namespace set).
// +kubebuilder:validation:XValidation:rule="self.kind != 'ServiceAccount' || (has(self.namespace) && size(self.namespace) > 0)",message="a ServiceAccount owner needs a namespace",fieldPath=".namespace"
type TokenOwner struct {
	// +kubebuilder:validation:Enum=User;ServiceAccount
	Kind string `json:"kind"`
	// Name is the username or the service account's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name"`
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
	// ID is the owner's stable id (local user UID, OIDC subject).
	// +optional
	// +kubebuilder:validation:MaxLength=256
	ID string `json:"id,omitempty"`
	// Provider is the identity provider id of an OIDC owner; empty for local users.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Provider string `json:"provider,omitempty"`
}

// APITokenStatus is written at most once a minute on use.
type APITokenStatus struct {
	// +optional
	LastUsedAt *metav1.Time `json:"lastUsedAt,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=64
	LastUsedIP string `json:"lastUsedIP,omitempty"`
}

// +kubebuilder:object:root=true

// APITokenList is a list of APIToken.
type APITokenList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []APIToken `json:"items"`
}

// ServiceAccount is a non-human principal that owns API tokens and acts as
// serviceaccount:<namespace>:<name>.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,path=serviceaccounts
type ServiceAccount struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ServiceAccountSpec `json:"spec,omitempty"`
}

// ServiceAccountSpec describes a service account.
type ServiceAccountSpec struct {
	// +optional
	// +kubebuilder:validation:MaxLength=500
	Description string `json:"description,omitempty"`
	// Disabled accounts' tokens are refused.
	// +optional
	Disabled bool `json:"disabled,omitempty"`
}

// +kubebuilder:object:root=true

// ServiceAccountList is a list of ServiceAccount.
type ServiceAccountList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ServiceAccount `json:"items"`
}

// RoleBinding grants a role to a subject at cluster scope or on one zone. The
// same spec shape is accepted in the rbac.bindings setting.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,path=rolebindings
type RoleBinding struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec RoleBindingSpec `json:"spec"`
}

// RoleBindingSpec is (subject, role, scope).
// +kubebuilder:validation:XValidation:rule="self.scope.kind != 'zone' || self.role == 'zone-admin'",message="only role zone-admin can be scoped to a zone",fieldPath=".role"
type RoleBindingSpec struct {
	Subject BindingSubject `json:"subject"`
	// +kubebuilder:validation:Enum=viewer;auditor;operator;zone-admin;admin
	Role string `json:"role"`
	// Scope omitted means cluster.
	// +optional
	// +kubebuilder:default={kind: cluster}
	Scope BindingScope `json:"scope,omitempty"`
}

// BindingSubject is who a binding grants to. Users are local usernames or
// prefixed OIDC usernames ("<idp>:<name>"); Kubernetes service accounts are
// Users named "system:serviceaccount:<ns>:<name>".
// +kubebuilder:validation:XValidation:rule="self.kind != 'ServiceAccount' || (has(self.namespace) && size(self.namespace) > 0)",message="a ServiceAccount subject needs a namespace",fieldPath=".namespace"
// +kubebuilder:validation:XValidation:rule="self.kind == 'ServiceAccount' || !has(self.namespace) || size(self.namespace) == 0",message="namespace is only allowed for ServiceAccount subjects",fieldPath=".namespace"
type BindingSubject struct {
	// +kubebuilder:validation:Enum=User;Group;ServiceAccount
	Kind string `json:"kind"`
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name"`
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
}

// BindingScope is cluster (everything) or zone (one DNSZone, by zone name).
// +kubebuilder:validation:XValidation:rule="self.kind != 'zone' || (has(self.name) && size(self.name) > 0)",message="scope kind zone needs a zone name",fieldPath=".name"
// +kubebuilder:validation:XValidation:rule="self.kind != 'cluster' || !has(self.name) || size(self.name) == 0",message="scope kind cluster takes no name",fieldPath=".name"
type BindingScope struct {
	// +kubebuilder:default=cluster
	// +kubebuilder:validation:Enum=cluster;zone
	Kind string `json:"kind"`
	// Name is the zone's DNS name (or the DNSZone object name) for kind zone.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
}

// +kubebuilder:object:root=true

// RoleBindingList is a list of RoleBinding.
type RoleBindingList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RoleBinding `json:"items"`
}

// IdentityProvider is an OIDC provider people log in with. The same spec shape
// (with id) is accepted in the auth.identityProviders setting.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,path=identityproviders
type IdentityProvider struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec IdentityProviderSpec `json:"spec"`
}

// IdentityProviderSpec holds the provider settings.
// +kubebuilder:validation:XValidation:rule="!(has(self.clientSecretFile) && has(self.clientSecretRef))",message="clientSecretFile and clientSecretRef exclude each other",fieldPath=".clientSecretRef"
type IdentityProviderSpec struct {
	// ID names the provider in routes (/auth/oidc/<id>/start), token owners and
	// the default prefixes "<id>:".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`
	ID string `json:"id"`
	// DisplayName is shown on the login page; empty means the id.
	// +optional
	// +kubebuilder:validation:MaxLength=100
	DisplayName string `json:"displayName,omitempty"`
	// IssuerURL must match the tokens' iss claim exactly.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https://[^\s]+$`
	IssuerURL string `json:"issuerURL"`
	// ClientID is the service's client at the provider.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	ClientID string `json:"clientID"`
	// ClientSecretFile is a file holding the client secret.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	ClientSecretFile string `json:"clientSecretFile,omitempty"`
	// ClientSecretRef is a Kubernetes Secret key holding the client secret.
	// +optional
	ClientSecretRef *SecretKeyRef `json:"clientSecretRef,omitempty"`
	// Audiences accepted besides the client id (for example a CLI client id).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	Audiences []string `json:"audiences,omitempty"`
	// UsernameClaim is the claim that names the user.
	// +optional
	// +kubebuilder:default=sub
	// +kubebuilder:validation:MinLength=1
	UsernameClaim string `json:"usernameClaim,omitempty"`
	// GroupsClaim is the claim that lists the user's groups.
	// +optional
	// +kubebuilder:default=groups
	// +kubebuilder:validation:MinLength=1
	GroupsClaim string `json:"groupsClaim,omitempty"`
	// UsernamePrefix is put before usernames; omitted means "<id>:", "" means none.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	UsernamePrefix *string `json:"usernamePrefix,omitempty"`
	// GroupsPrefix is put before group names; omitted means "<id>:", "" means none.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	GroupsPrefix *string `json:"groupsPrefix,omitempty"`
	// Scopes requested at login.
	// +optional
	// +listType=set
	// +kubebuilder:default={openid,profile,email}
	// +kubebuilder:validation:MaxItems=32
	Scopes []string `json:"scopes,omitempty"`
}

// SecretKeyRef names one key of a Kubernetes Secret in the service's namespace.
type SecretKeyRef struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// +kubebuilder:validation:MinLength=1
	Key string `json:"key"`
}

// +kubebuilder:object:root=true

// IdentityProviderList is a list of IdentityProvider.
type IdentityProviderList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IdentityProvider `json:"items"`
}
