package api

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/internal/settings"
	"github.com/svcdns/svc/internal/unblock"
)

// UnblockRequester is who filed an unblock request.
type UnblockRequester struct {
	IP       string `json:"ip,omitempty" doc:"the client address the block page saw"`
	ClientID string `json:"clientID,omitempty"`
	Contact  string `json:"contact,omitempty" doc:"name or e-mail the requester typed"`
	User     string `json:"user,omitempty"`
}

// UnblockRequestInfo is one unblock request: what was asked, and the decision.
type UnblockRequestInfo struct {
	Namespace   string           `json:"namespace"`
	Name        string           `json:"name"`
	Domain      string           `json:"domain"`
	Reason      string           `json:"reason,omitempty"`
	Requester   UnblockRequester `json:"requester"`
	Policy      string           `json:"policy,omitempty" doc:"namespace/name of the policy that blocked the domain"`
	List        string           `json:"list,omitempty" doc:"namespace/name of the list (or service:<id>) that blocked it"`
	Rule        string           `json:"rule,omitempty" doc:"the rule that matched"`
	Phase       string           `json:"phase" enum:"pending,approved,denied,expired"`
	Submissions int32            `json:"submissions" doc:"times filed while pending (repeats are merged)"`
	CreatedAt   time.Time        `json:"createdAt"`
	ExpiresAt   *time.Time       `json:"expiresAt,omitempty" doc:"pending: when it expires undecided; approved: when a timed approval ends"`
	DecidedBy   string           `json:"decidedBy,omitempty"`
	DecidedAt   *time.Time       `json:"decidedAt,omitempty"`
	Comment     string           `json:"comment,omitempty" doc:"the administrator's note"`
	Scope       string           `json:"scope,omitempty" doc:"approved: everyone or groups"`
	Groups      []string         `json:"groups,omitempty"`
	Match       string           `json:"match,omitempty" doc:"approved: exact or subdomains"`
	Duration    string           `json:"duration,omitempty" doc:"approved for this long; empty: permanent"`
	Entry       string           `json:"entry,omitempty" doc:"namespace/name of the allow list holding the approval's entries"`
	Policies    []string         `json:"policies,omitempty" doc:"policies the allow list was attached to (approvals for groups)"`
	Message     string           `json:"message,omitempty" doc:"the Ready condition's message"`
}

// UnblockRequestPage is a page of unblock requests.
type UnblockRequestPage struct {
	Items    []UnblockRequestInfo `json:"items"`
	Pending  int                  `json:"pending" doc:"pending requests in the namespaces asked (whatever the phase filter)"`
	Continue string               `json:"continue"`
	TookMS   float64              `json:"took_ms"`
}

func (p *UnblockRequestPage) setTook(ms float64) { p.TookMS = ms }

// UnblockApproval is the body of an approval.
type UnblockApproval struct {
	Scope     string   `json:"scope,omitempty" enum:"everyone,groups" doc:"default everyone"`
	Groups    []string `json:"groups,omitempty" maxItems:"100" doc:"ClientGroups (namespace/name, or a name in the request's namespace); required with scope groups"`
	Match     string   `json:"match,omitempty" enum:"exact,subdomains" doc:"default exact; subdomains also allows every name below the domain"`
	Duration  string   `json:"duration,omitempty" maxLength:"32" doc:"unblock for this long (Go duration, e.g. 24h or 90m); omitted: permanent"`
	Permanent bool     `json:"permanent,omitempty" doc:"explicitly permanent; excludes duration"`
	Comment   string   `json:"comment,omitempty" maxLength:"1000"`
}

// UnblockDenial is the body of a denial.
type UnblockDenial struct {
	Comment string `json:"comment,omitempty" maxLength:"1000" doc:"why, shown to whoever reads the request"`
}

// UnblockParams address one unblock request.
type UnblockParams struct {
	Namespace string `path:"namespace" maxLength:"253"`
	Name      string `path:"name" maxLength:"253"`
}

type unblockListIn struct {
	Namespace string `query:"namespace" maxLength:"253" doc:"only this namespace (default: every namespace)"`
	Phase     string `query:"phase" enum:"pending,approved,denied,expired"`
	Domain    string `query:"domain" maxLength:"253" doc:"substring of the domain"`
	Limit     int    `query:"limit" minimum:"0" maximum:"1000" doc:"page size; 0 means 100"`
	Continue  string `query:"continue" maxLength:"32"`
}

type unblockApproveIn struct {
	UnblockParams
	Body UnblockApproval
}

type unblockDenyIn struct {
	UnblockParams
	Body UnblockDenial
}

type unblockListOut struct{ Body *UnblockRequestPage }
type unblockOut struct{ Body *UnblockRequestInfo }

// unblockService decides requests over the API's store (its writes are
// noted for the visibility wait, so an approval answers once this node
// serves the allow entry). Filing is the block page's; it needs no
// settings here.
func (s *Server) unblockService() *unblock.Service {
	return unblock.NewService(s.deps.Store, func() settings.UnblockRequests { return settings.UnblockRequests{} }, s.clock).WithLogger(s.log)
}

func (s *Server) registerUnblockRoutes() {
	svc := s.unblockService()
	tags := []string{"Unblock requests"}
	register(s, huma.Operation{OperationID: "unblockrequests-list", Method: http.MethodGet, Path: "/unblockrequests", Summary: "List unblock requests", Tags: tags,
		Description: "Pending requests first (oldest first: the queue), then decided and expired ones, newest first."},
		clusterPerm("unblockrequests.read"), func(ctx context.Context, in *unblockListIn) (*unblockListOut, error) {
			all, err := svc.List(ctx, unblock.ListOptions{Namespace: in.Namespace, Domain: in.Domain})
			if err != nil {
				return nil, fromError(err)
			}
			page := &UnblockRequestPage{Items: []UnblockRequestInfo{}}
			var matched []v1alpha1.UnblockRequest
			for i := range all {
				ph := unblock.Phase(&all[i])
				if ph == unblock.PhasePending {
					page.Pending++
				}
				if in.Phase == "" || ph == in.Phase {
					matched = append(matched, all[i])
				}
			}
			off := 0
			if in.Continue != "" {
				b, err := base64.RawURLEncoding.DecodeString(in.Continue)
				n, err2 := strconv.Atoi(string(b))
				if err != nil || err2 != nil || n < 0 {
					return nil, errInvalid("continue: not a token of this list; start again without it")
				}
				off = n
			}
			limit := in.Limit
			if limit == 0 {
				limit = 100
			}
			for i := off; i < len(matched) && i < off+limit; i++ {
				page.Items = append(page.Items, unblockInfo(&matched[i]))
			}
			if off+limit < len(matched) {
				page.Continue = base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(off + limit)))
			}
			return &unblockListOut{Body: page}, nil
		})
	register(s, huma.Operation{OperationID: "unblockrequests-get", Method: http.MethodGet, Path: "/unblockrequests/{namespace}/{name}", Summary: "One unblock request", Tags: tags,
		Errors: []int{http.StatusNotFound}},
		clusterPerm("unblockrequests.read"), func(ctx context.Context, in *UnblockParams) (*unblockOut, error) {
			r, err := svc.Get(ctx, in.Namespace, in.Name)
			if err != nil {
				return nil, fromError(err)
			}
			info := unblockInfo(r)
			return &unblockOut{Body: &info}, nil
		})
	register(s, huma.Operation{OperationID: "unblockrequests-approve", Method: http.MethodPost, Path: "/unblockrequests/{namespace}/{name}/approve", Summary: "Approve a pending unblock request", Tags: tags,
		Description: "Writes allow entries (origin `unblock`, `request` the request, `createdBy` the caller) for the domain, and for subdomains with match `subdomains`. " +
			"Scope everyone: into the namespace's global allow list `unblocked`. Scope groups: into a list for those groups (`unblocked-<groups>`, spec.global false), " +
			"attached to the namespace's policies whose clientGroupRefs are all among the groups; refused (400) when no policy serves only those groups. " +
			"With a duration the entries are removed when it ends and the request becomes expired. A request that is not pending answers 409 conflict.",
		Errors: []int{http.StatusNotFound, http.StatusConflict}},
		clusterPerm("unblockrequests.write"), func(ctx context.Context, in *unblockApproveIn) (*unblockOut, error) {
			b := in.Body
			a := unblock.Approval{Scope: b.Scope, Groups: b.Groups, Match: b.Match, Permanent: b.Permanent, Comment: b.Comment, By: callerName(ctx)}
			if b.Duration != "" {
				d, err := time.ParseDuration(b.Duration)
				if err != nil || d <= 0 {
					return nil, errInvalid("duration %q: expected a positive duration such as 24h, 90m or 7h30m", b.Duration)
				}
				a.Duration = d
			}
			r, err := svc.Approve(ctx, in.Namespace, in.Name, a)
			if err != nil {
				auditObject(ctx, "approve", unblock.Kind, in.Namespace, in.Name, "error")
				return nil, unblockErr(err)
			}
			auditObject(ctx, "approve", unblock.Kind, in.Namespace, in.Name, "approved")
			if ns, list, ok := cutRef(r.Status.Entry); ok {
				auditObject(ctx, "update", kindBlockList, ns, list, "entries-add")
			}
			for _, p := range r.Status.Policies {
				if ns, name, ok := cutRef(p); ok {
					auditObject(ctx, "update", kindPolicy, ns, name, "allow-list-attached")
				}
			}
			info := unblockInfo(r)
			return &unblockOut{Body: &info}, nil
		})
	register(s, huma.Operation{OperationID: "unblockrequests-deny", Method: http.MethodPost, Path: "/unblockrequests/{namespace}/{name}/deny", Summary: "Deny a pending unblock request", Tags: tags,
		Description: "Records who denied it, when and why. A request that is not pending answers 409 conflict.",
		Errors:      []int{http.StatusNotFound, http.StatusConflict}},
		clusterPerm("unblockrequests.write"), func(ctx context.Context, in *unblockDenyIn) (*unblockOut, error) {
			r, err := svc.Deny(ctx, in.Namespace, in.Name, in.Body.Comment, callerName(ctx))
			if err != nil {
				auditObject(ctx, "deny", unblock.Kind, in.Namespace, in.Name, "error")
				return nil, unblockErr(err)
			}
			auditObject(ctx, "deny", unblock.Kind, in.Namespace, in.Name, "denied")
			info := unblockInfo(r)
			return &unblockOut{Body: &info}, nil
		})
}

func unblockErr(err error) *Error {
	var ue *unblock.Error
	if errors.As(err, &ue) {
		st := statusOfKey[ue.Key]
		if st == 0 {
			st = http.StatusConflict
		}
		return newErr(st, ue.Key, ue.Msg, ue.Hint)
	}
	return fromError(err)
}

func cutRef(ref string) (string, string, bool) { return strings.Cut(ref, "/") }

// callerName is the principal's name for createdBy and decidedBy.
func callerName(ctx context.Context) string {
	if p := state(ctx).principal; p != nil {
		return p.Name
	}
	return ""
}

func unblockInfo(r *v1alpha1.UnblockRequest) UnblockRequestInfo {
	i := UnblockRequestInfo{Namespace: r.Namespace, Name: r.Name, Domain: r.Spec.Domain, Reason: r.Spec.Reason,
		Policy: r.Spec.Policy, List: r.Spec.List, Rule: r.Spec.Rule, Phase: unblock.Phase(r), Submissions: max(r.Status.Submissions, 1),
		CreatedAt: r.CreationTimestamp.UTC(), DecidedBy: r.Status.DecidedBy, Comment: r.Status.Comment,
		Entry: r.Status.Entry, Policies: r.Status.Policies}
	if q := r.Spec.Requester; q != nil {
		i.Requester = UnblockRequester{IP: q.IP, ClientID: q.ClientID, Contact: q.Contact, User: q.User}
	}
	if r.Status.ExpiresAt != nil {
		t := r.Status.ExpiresAt.UTC()
		i.ExpiresAt = &t
	}
	if r.Status.DecidedAt != nil {
		t := r.Status.DecidedAt.UTC()
		i.DecidedAt = &t
	}
	if i.Phase == unblock.PhaseApproved || (i.Phase == unblock.PhaseExpired && r.Status.DecidedAt != nil) {
		i.Scope, i.Groups, i.Match, i.Duration = r.Spec.Scope, r.Spec.Groups, r.Spec.Match, r.Spec.Duration
	}
	for _, c := range r.Status.Conditions {
		if c.Type == "Ready" {
			i.Message = c.Message
		}
	}
	return i
}
