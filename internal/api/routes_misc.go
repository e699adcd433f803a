package api

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/svcdns/svc/internal/auth"
	"github.com/svcdns/svc/internal/auth/audit"
	"github.com/svcdns/svc/internal/store"
	"github.com/svcdns/svc/internal/version"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func (s *Server) registerRoutes() {
	s.registerAuthRoutes()
	s.registerOIDCRoutes()
	s.registerIAMRoutes()
	s.registerApplyRoute()
	s.registerObjectRoutes()
	s.registerZoneRoutes()
	s.registerSettingsRoutes()
	s.registerDNSRoutes()
	s.registerMiscRoutes()
	s.registerQueryLogRoutes()
	s.registerCatalogueRoutes()
	s.registerPolicyRoutes()
	s.registerBlockListRoutes()
	s.registerClusterRoutes()
	s.registerBackupRoutes()
	s.registerUnblockRoutes()
	s.registerBlockPageRoutes()
}

type versionOut struct{ Body version.Info }

// AuditPage is one page of the audit trail.
type AuditPage struct {
	Items      []audit.Event `json:"items"`
	Node       string        `json:"node"`
	TookMS     float64       `json:"took_ms"`
	Continue   string        `json:"continue"`
	CursorNext string        `json:"cursor_next,omitempty"`
}

func (a *AuditPage) setTook(ms float64) { a.TookMS = ms }

type auditIn struct {
	Order    string    `query:"order" enum:"asc,desc" default:"asc"`
	Actor    string    `query:"actor" maxLength:"253"`
	Kind     string    `query:"kind" maxLength:"64"`
	Name     string    `query:"name" maxLength:"253"`
	Since    time.Time `query:"since" doc:"RFC 3339 time"`
	Limit    int       `query:"limit" minimum:"0" maximum:"1000"`
	Continue string    `query:"continue" maxLength:"32"`
}

type auditOut struct{ Body *AuditPage }

type messagesOut struct {
	Body *ListBody[DiagnosisMessage]
}

func (s *Server) registerMiscRoutes() {
	register(s, huma.Operation{OperationID: "version", Method: http.MethodGet, Path: "/version", Summary: "Build information", Tags: []string{"info"}},
		public(), func(context.Context, *emptyIn) (*versionOut, error) { return &versionOut{Body: version.Get()}, nil })
	register(s, huma.Operation{OperationID: "audit", Method: http.MethodGet, Path: "/audit", Summary: "Audit trail of writes", Tags: []string{"info"}},
		clusterPerm("audit.read"), s.listAudit)
	register(s, huma.Operation{OperationID: "info-messages", Method: http.MethodGet, Path: "/info/messages", Summary: "Diagnosis messages", Tags: []string{"info"}},
		clusterPerm("messages.read"), s.messages)
}

func (s *Server) listAudit(ctx context.Context, in *auditIn) (*auditOut, error) {
	p, err := s.audit.List(ctx, audit.Query{Desc: in.Order == "desc", Actor: in.Actor, Kind: in.Kind, Name: in.Name,
		Since: in.Since, Limit: in.Limit, Continue: in.Continue})
	if err != nil {
		return nil, errInvalid("%v", err)
	}
	if p.Items == nil {
		p.Items = []audit.Event{}
	}
	return &auditOut{Body: &AuditPage{Items: p.Items, Node: s.opts.NodeName, Continue: p.Continue, CursorNext: p.Continue}}, nil
}

func (s *Server) messages(ctx context.Context, _ *emptyIn) (*messagesOut, error) {
	out := &ListBody[DiagnosisMessage]{Items: []DiagnosisMessage{}}
	if _, diag, err := s.bindings.get(ctx); err == nil {
		for _, d := range diag {
			out.Items = append(out.Items, DiagnosisMessage{Severity: "warning", Source: "rbac", Reason: "IgnoredRoleBinding", Message: d, Node: s.opts.NodeName})
		}
	}
	for _, d := range s.deps.OIDC.Diagnoses(ctx) {
		out.Items = append(out.Items, DiagnosisMessage{Severity: "error", Source: "oidc", Reason: "IdentityProviderBroken", Message: d, Node: s.opts.NodeName})
	}
	if s.deps.Messages != nil {
		ms, err := s.deps.Messages.Messages(ctx)
		if err != nil {
			return nil, fromError(err)
		}
		out.Items = append(out.Items, ms...)
	}
	return &messagesOut{Body: out}, nil
}

// IAMUser is a local user without its password hash.
type IAMUser struct {
	Name               string     `json:"name"`
	DisplayName        string     `json:"displayName,omitempty"`
	BuiltinAdmin       bool       `json:"builtinAdmin"`
	Disabled           bool       `json:"disabled"`
	MustChangePassword bool       `json:"mustChangePassword"`
	Groups             []string   `json:"groups"`
	LastLoginAt        *time.Time `json:"lastLoginAt,omitempty"`
	PasswordChangedAt  *time.Time `json:"passwordChangedAt,omitempty"`
}

// ServiceAccountInfo is a service account with its token count.
type ServiceAccountInfo struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Disabled  bool   `json:"disabled"`
	Tokens    int    `json:"tokens"`
}

// RoleBindingInfo is one effective binding.
type RoleBindingInfo struct {
	Name    string       `json:"name"`
	Source  string       `json:"source" enum:"config,object"`
	Subject auth.Subject `json:"subject"`
	Role    string       `json:"role"`
	Scope   auth.Scope   `json:"scope"`
}

// IdentityProviderInfo is a provider without secrets.
type IdentityProviderInfo struct {
	ID          string `json:"id"`
	DisplayName string `json:"displayName,omitempty"`
	IssuerURL   string `json:"issuerURL,omitempty"`
	ClientID    string `json:"clientID,omitempty"`
	// Source is config (auth.identityProviders) or object.
	Source         string   `json:"source,omitempty" enum:"config,object"`
	Audiences      []string `json:"audiences,omitempty"`
	UsernameClaim  string   `json:"usernameClaim,omitempty"`
	GroupsClaim    string   `json:"groupsClaim,omitempty"`
	UsernamePrefix *string  `json:"usernamePrefix,omitempty"`
	GroupsPrefix   *string  `json:"groupsPrefix,omitempty"`
	Scopes         []string `json:"scopes,omitempty"`
	// ClientSecretFile is the path of the secret file (never its content).
	ClientSecretFile string `json:"clientSecretFile,omitempty"`
	// ClientSecretRef names the Secret and key as <name>/<key>.
	ClientSecretRef string `json:"clientSecretRef,omitempty"`
	// StartURL begins a browser login through the provider.
	StartURL string `json:"startURL,omitempty"`
}

type usersOut struct{ Body *AuthListBody[IAMUser] }
type saOut struct {
	Body *AuthListBody[ServiceAccountInfo]
}
type rbOut struct {
	Body *AuthListBody[RoleBindingInfo]
}
type idpOut struct {
	Body *AuthListBody[IdentityProviderInfo]
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func (s *Server) registerIAMRoutes() {
	tags := []string{"iam"}
	register(s, huma.Operation{OperationID: "iam-users", Method: http.MethodGet, Path: "/iam/users", Summary: "Local users", Tags: tags},
		clusterPerm("users.read"), func(ctx context.Context, _ *emptyIn) (*usersOut, error) {
			us, err := s.dir.ListUsers(ctx)
			if err != nil {
				return nil, fromError(err)
			}
			out := &AuthListBody[IAMUser]{Items: []IAMUser{}}
			for _, u := range us {
				g := u.Groups
				if g == nil {
					g = []string{}
				}
				out.Items = append(out.Items, IAMUser{Name: u.Username, DisplayName: u.DisplayName, BuiltinAdmin: u.BuiltinAdmin,
					Disabled: u.Disabled, MustChangePassword: u.MustChangePassword, Groups: g,
					LastLoginAt: timePtr(u.LastLoginAt), PasswordChangedAt: timePtr(u.PasswordChangedAt)})
			}
			return &usersOut{Body: out}, nil
		})
	register(s, huma.Operation{OperationID: "iam-serviceaccounts", Method: http.MethodGet, Path: "/iam/serviceaccounts", Summary: "Service accounts with token counts", Tags: tags},
		clusterPerm("serviceaccounts.read"), func(ctx context.Context, _ *emptyIn) (*saOut, error) {
			objs, err := s.listAll(ctx, auth.KindServiceAccount)
			if err != nil {
				return nil, fromError(err)
			}
			ts, err := s.dir.ListTokens(ctx)
			if err != nil {
				return nil, fromError(err)
			}
			count := map[string]int{}
			for _, t := range ts {
				if t.Owner.Kind == "ServiceAccount" {
					count[t.Owner.Namespace+"/"+t.Owner.Name]++
				}
			}
			out := &AuthListBody[ServiceAccountInfo]{Items: []ServiceAccountInfo{}}
			for _, o := range objs {
				d, _, _ := unstructured.NestedBool(o.Object, "spec", "disabled")
				out.Items = append(out.Items, ServiceAccountInfo{Namespace: o.GetNamespace(), Name: o.GetName(), Disabled: d,
					Tokens: count[o.GetNamespace()+"/"+o.GetName()]})
			}
			return &saOut{Body: out}, nil
		})
	register(s, huma.Operation{OperationID: "iam-rolebindings", Method: http.MethodGet, Path: "/iam/rolebindings", Summary: "Role bindings from config and objects", Tags: tags},
		clusterPerm("rolebindings.read"), func(ctx context.Context, _ *emptyIn) (*rbOut, error) {
			bs, diag, err := s.bindings.get(ctx)
			if err != nil {
				return nil, fromError(err)
			}
			out := &AuthListBody[RoleBindingInfo]{Items: []RoleBindingInfo{}, Diagnoses: diag}
			for _, b := range bs {
				out.Items = append(out.Items, RoleBindingInfo{Name: b.Name, Source: b.Source, Subject: b.Subject, Role: b.Role, Scope: b.Scope})
			}
			return &rbOut{Body: out}, nil
		})
	register(s, huma.Operation{OperationID: "iam-identityproviders", Method: http.MethodGet, Path: "/iam/identityproviders", Summary: "Identity providers without secrets", Tags: tags},
		clusterPerm("identityproviders.read"), func(ctx context.Context, _ *emptyIn) (*idpOut, error) {
			return &idpOut{Body: s.identityProviderInfos(ctx)}, nil
		})
}

func (s *Server) listAll(ctx context.Context, kind string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	cont := ""
	for range 10000 {
		res, err := s.deps.Store.List(ctx, store.ListOptions{Kind: kind, Limit: 500, Continue: cont})
		if err != nil {
			return nil, err
		}
		out = append(out, res.Items...)
		if cont = res.Continue; cont == "" {
			break
		}
	}
	return out, nil
}

// registerDocs serves the OpenAPI document (3.1 and a 3.0 copy) and an
// interactive reference. They are public and outside the route registry.
func (s *Server) registerDocs(mux *http.ServeMux) {
	mux.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, r *http.Request) {
		b, err := json.Marshal(s.api.OpenAPI())
		if err != nil {
			writeError(w, r, errInternal())
			return
		}
		w.Header().Set("Content-Type", "application/openapi+json")
		_, _ = w.Write(b)
	})
	mux.HandleFunc("GET /openapi-3.0.json", func(w http.ResponseWriter, r *http.Request) {
		b, err := s.api.OpenAPI().Downgrade()
		if err != nil {
			writeError(w, r, errInternal())
			return
		}
		w.Header().Set("Content-Type", "application/openapi+json")
		_, _ = w.Write(b)
	})
	s.registerDocsPage(mux)
}
