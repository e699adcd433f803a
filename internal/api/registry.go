package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	"github.com/svcdns/svc/internal/auth"
	"github.com/svcdns/svc/internal/auth/audit"
)

// OpenAPI extensions carrying each operation's access rule.
const (
	extPermission  = "x-permission"
	extScope       = "x-permission-scope"
	extSelfService = "x-self-service"
	// permPublic marks a route anyone may call.
	permPublic = "public"
)

// access is the permission a route declares and where it is evaluated.
type access struct {
	perm  string
	scope string // "cluster", "any" (held at some scope; the handler narrows), "zone:<param>"
	self  bool   // self-service: allowed while a password change is required
}

// public routes need no credential.
func public() access { return access{perm: permPublic, scope: "cluster"} }

// clusterPerm is evaluated at cluster scope.
func clusterPerm(perm string) access { return access{perm: perm, scope: "cluster"} }

// anyScope is granted when perm is held at cluster or some zone scope; the
// handler checks each object's zone.
func anyScope(perm string) access { return access{perm: perm, scope: "any"} }

// zonePerm is evaluated at the scope of the zone named by path parameter param.
func zonePerm(perm, param string) access { return access{perm: perm, scope: "zone:" + param} }

// selfService routes stay open while the caller must change its password.
func (a access) selfService() access { a.self = true; return a }

type routeInfo struct {
	Method, Path, Permission, Scope string
	Public, SelfService             bool
}

// register adds a route with its permission in the same call; the
// permission is stored in the operation so that the OpenAPI document shows
// it and tests can walk it.
func register[I, O any](s *Server, op huma.Operation, a access, h func(context.Context, *I) (*O, error)) {
	if op.Extensions == nil {
		op.Extensions = map[string]any{}
	}
	op.Extensions[extPermission] = a.perm
	op.Extensions[extScope] = a.scope
	if a.self {
		op.Extensions[extSelfService] = true
	}
	if a.perm != permPublic {
		op.Security = []map[string][]string{{"bearer": {}}, {"cookie": {}}}
		op.Description = strings.TrimSpace(op.Description + "\n\nPermission: `" + a.perm + "` (" + a.scope + ").")
	} else {
		op.Description = strings.TrimSpace(op.Description + "\n\nPublic.")
	}
	if op.MaxBodyBytes == 0 {
		op.MaxBodyBytes = maxSmallBody
	}
	op.Errors = append(op.Errors, http.StatusBadRequest)
	if a.perm != permPublic {
		op.Errors = append(op.Errors, http.StatusUnauthorized, http.StatusForbidden)
	}
	s.routes = append(s.routes, &routeInfo{Method: op.Method, Path: op.Path, Permission: a.perm, Scope: a.scope, Public: a.perm == permPublic, SelfService: a.self})
	huma.Register(s.api, op, h)
}

// writeHumaErr writes an error body from a huma middleware.
func writeHumaErr(ctx huma.Context, e *Error) {
	e.TookMS = tookMS(ctx.Context())
	noteAnswer(ctx.Context(), e)
	for k, vs := range e.headers {
		for _, v := range vs {
			ctx.AppendHeader(k, v)
		}
	}
	ctx.SetHeader("Content-Type", "application/json")
	ctx.SetStatus(e.status)
	_ = json.NewEncoder(ctx.BodyWriter()).Encode(e)
}

// authorize is the huma middleware enforcing each operation's permission;
// it also records every unsafe request in the audit trail.
func (s *Server) authorize(ctx huma.Context, next func(huma.Context)) {
	op := ctx.Operation()
	perm, _ := op.Extensions[extPermission].(string)
	scope, _ := op.Extensions[extScope].(string)
	self, _ := op.Extensions[extSelfService].(bool)
	st := state(ctx.Context())
	if perm == "" {
		// Unreachable through register; refuse rather than serve unguarded.
		writeHumaErr(ctx, errInternal())
		return
	}
	if perm != permPublic {
		p := st.principal
		if p == nil {
			if st.csrfFailed {
				writeHumaErr(ctx, newErr(http.StatusForbidden, KeyCSRF, "missing or invalid CSRF token", "send the X-Service-CSRF header with the value from GET /auth/me"))
				return
			}
			writeHumaErr(ctx, errUnauthenticated())
			return
		}
		if p.MustChangePassword && !self {
			writeHumaErr(ctx, newErr(http.StatusForbidden, KeyPasswordChangeRequired, "the password must be changed first",
				"svc passwd, or svc login -u NAME (asks for a new password); the API route is POST /auth/password"))
			return
		}
		var d auth.Decision
		switch {
		case scope == "any":
			cluster, zones := s.authz.AllowedZones(ctx.Context(), p, perm)
			d = auth.Decision{Allowed: cluster || len(zones) > 0, Path: auth.PathBinding, Missing: perm}
			if d.Allowed && (p.BuiltinAdmin || auth.IsImplicit(perm)) {
				d.Path = auth.PathLocal
			}
		case strings.HasPrefix(scope, "zone:"):
			d = s.authz.Authorize(ctx.Context(), p, perm, auth.ZoneScope(ctx.Param(strings.TrimPrefix(scope, "zone:"))))
		default:
			d = s.authz.Authorize(ctx.Context(), p, perm, auth.ClusterScope)
		}
		if !d.Allowed {
			writeHumaErr(ctx, errForbidden(perm))
			return
		}
		st.decision = d.Path
	}
	next(ctx)
	if unsafeMethod(ctx.Method()) {
		s.recordAudit(ctx.Context(), st, ctx.Method(), op.Path, ctx.Status())
	}
}

// auditTarget names what a write touched; handlers add one per object.
func auditObject(ctx context.Context, action, kind, namespace, name, result string) {
	st := state(ctx)
	st.targets = append(st.targets, auditTarget{action: action, kind: kind, namespace: namespace, name: name, result: result})
}

func actorOf(p *auth.Principal) audit.Actor {
	if p == nil {
		return audit.Actor{Kind: "Anonymous", Name: "anonymous"}
	}
	return audit.Actor{Auth: p.AuthMethod, Groups: p.Groups, ID: p.ID, Kind: p.Kind, Name: p.Name}
}

func (s *Server) recordAudit(ctx context.Context, st *reqState, method, path string, status int) {
	targets := st.targets
	if len(targets) == 0 {
		targets = []auditTarget{{action: strings.ToLower(method)}}
	}
	actor := actorOf(st.principal)
	decision := st.decision
	if decision == "" {
		decision = auth.PathNone
	}
	for _, t := range targets {
		if t.action == "login" && st.principal == nil {
			actor = audit.Actor{Kind: "User", Name: t.name, Auth: "password"}
		}
		_, err := s.audit.Append(context.WithoutCancel(ctx), audit.Event{
			Node: s.opts.NodeName, Actor: actor, Decision: decision, RequestID: st.id,
			Method: method, Path: path, Action: t.action, Kind: t.kind, Namespace: t.namespace,
			Name: t.name, Status: status, Result: t.result,
		})
		if err != nil {
			s.log.Error("writing audit event", "request_id", st.id, "error", err)
		}
	}
}
