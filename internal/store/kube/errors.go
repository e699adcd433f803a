package kube

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/svcdns/svc/internal/store"
)

// request names what the driver asked the apiserver for, so that a refusal
// can name the permission it lacked.
type request struct {
	verb      string // create, update, delete
	resource  string // plural, with /status for the subresource
	group     string // "" for core (secrets)
	namespace string // "" for cluster-scoped objects
	name      string
}

func (d *Driver) request(verb string, ki *kindInfo, ns, name string) request {
	if ki.Internal {
		return request{verb: verb, resource: secretsGVR.Resource, namespace: d.namespace, name: name}
	}
	if !ki.Namespaced {
		ns = ""
	}
	return request{verb: verb, resource: ki.GVR.Resource, group: ki.GVR.Group, namespace: ns, name: name}
}

func (d *Driver) statusRequest(ki *kindInfo, key store.Key) request {
	r := d.request("update", ki, key.Namespace, key.Name)
	r.resource += "/status"
	return r
}

// qualified is resource.group as RBAC rules and kubectl name it.
func (r request) qualified() string {
	if r.group == "" {
		return r.resource
	}
	res, sub, _ := strings.Cut(r.resource, "/")
	q := res + "." + r.group
	if sub != "" {
		q += "/" + sub
	}
	return q
}

func (r request) where() string {
	if r.namespace == "" {
		return "cluster-wide"
	}
	return "in namespace " + r.namespace
}

// RefusedError is a write the apiserver refused for a reason the caller of
// the service cannot fix by changing the request: the service's own
// credentials lack a permission (Forbidden) or were rejected
// (Unauthorized), the apiserver throttled the service (TooManyRequests), or
// it could not take the write (unavailable, timeouts, internal errors). It
// names the key, status and hint the REST API answers with; the apiserver's
// own error stays wrapped for the log.
type RefusedError struct {
	// Key is the API error key: forbidden, unavailable, rate_limited or
	// unprocessable (an admission webhook's denial).
	Key     string
	Status  int
	Message string
	Hint    string
	// Missing names the Kubernetes permission a Forbidden lacked, e.g.
	// "kubernetes: create dnsrecordsets.service.io in namespace web".
	Missing string
	// Retry is the apiserver's Retry-After, if any.
	Retry time.Duration
	err   error
}

func (e *RefusedError) Error() string { return e.Message + ": " + e.err.Error() }
func (e *RefusedError) Unwrap() error { return e.err }

// ErrorKey, HTTPStatus, ErrorMessage, ErrorHint, MissingPermission,
// RetryAfter and ServerFault shape the REST API's answer (internal/api).
func (e *RefusedError) ErrorKey() string          { return e.Key }
func (e *RefusedError) HTTPStatus() int           { return e.Status }
func (e *RefusedError) ErrorMessage() string      { return e.Message }
func (e *RefusedError) ErrorHint() string         { return e.Hint }
func (e *RefusedError) MissingPermission() string { return e.Missing }
func (e *RefusedError) RetryAfter() time.Duration { return e.Retry }
func (e *RefusedError) ServerFault() bool         { return e.Key != "unprocessable" }

// rbacDenial matches the RBAC authorizer's message, for the user the
// apiserver saw (the ServiceAccount the service runs as).
var rbacDenial = regexp.MustCompile(`User "([^"]*)" cannot ([a-z]+) resource "([^"]*)"`)

// mapErr turns an apiserver error of req into the store's errors (conflict,
// not found, too large, invalid) or a *RefusedError.
func mapErr(err error, req request) error {
	switch {
	case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err):
		return fmt.Errorf("%w: %v", store.ErrConflict, err)
	case apierrors.IsNotFound(err):
		if se, ok := err.(apierrors.APIStatus); ok && se.Status().Details != nil && se.Status().Details.Kind == "namespaces" {
			return fmt.Errorf("%w: %v", store.ErrInvalid, err)
		}
		return fmt.Errorf("%w: %v", store.ErrNotFound, err)
	case apierrors.IsRequestEntityTooLargeError(err), strings.Contains(err.Error(), "too large"):
		return fmt.Errorf("%w: %v", store.ErrTooLarge, err)
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return fmt.Errorf("%w: %v", store.ErrInvalid, err)
	case apierrors.IsForbidden(err):
		return forbidden(err, req)
	case apierrors.IsUnauthorized(err):
		return &RefusedError{Key: "unavailable", Status: http.StatusServiceUnavailable, err: err,
			Message: fmt.Sprintf("the Kubernetes apiserver rejected the service's credentials when it tried to %s %s", req.verb, req.qualified()),
			Hint:    "the pod's ServiceAccount token is missing, expired or revoked (or KUBECONFIG names bad credentials): check that the ServiceAccount exists and restart the pod"}
	case apierrors.IsTooManyRequests(err):
		retry := time.Second
		if s, ok := apierrors.SuggestsClientDelay(err); ok && s > 0 {
			retry = time.Duration(s) * time.Second
		}
		return &RefusedError{Key: "rate_limited", Status: http.StatusTooManyRequests, Retry: retry, err: err,
			Message: fmt.Sprintf("the Kubernetes apiserver is throttling the service (%s %s)", req.verb, req.qualified()),
			Hint:    fmt.Sprintf("retry after %s; if it persists, check the apiserver's priority and fairness settings for the service's ServiceAccount", retry)}
	case apierrors.IsServiceUnavailable(err), apierrors.IsServerTimeout(err), apierrors.IsTimeout(err),
		apierrors.IsInternalError(err), apierrors.IsUnexpectedServerError(err), isNetError(err):
		return &RefusedError{Key: "unavailable", Status: http.StatusServiceUnavailable, err: err,
			Message: fmt.Sprintf("the Kubernetes apiserver could not take the write (%s %s %s)", req.verb, req.qualified(), req.where()),
			Hint:    "retry later; DNS keeps answering from the last snapshot meanwhile"}
	}
	return err
}

// forbidden tells an RBAC denial (the service lacks a permission: the
// chart's roles are missing a rule) from an admission webhook's or a
// terminating namespace's refusal (the object itself is refused).
func forbidden(err error, req request) error {
	m := rbacDenial.FindStringSubmatch(err.Error())
	if m == nil {
		return &RefusedError{Key: "unprocessable", Status: http.StatusUnprocessableEntity, err: err,
			Message: "the Kubernetes apiserver refused the object: " + statusMessage(err),
			Hint:    "an admission policy of the cluster refused it (or its namespace is being deleted): change the object to satisfy the policy"}
	}
	user, verb, resource := m[1], m[2], m[3]
	if verb == "" {
		verb = req.verb
	}
	denied := req
	denied.verb, denied.resource = verb, resource
	perm := verb + " " + denied.qualified() + " " + denied.where()
	role := "ClusterRole"
	if req.group == "" {
		role = "Role in namespace " + req.namespace
	}
	return &RefusedError{Key: "forbidden", Status: http.StatusForbidden, err: err, Missing: "kubernetes: " + perm,
		Message: fmt.Sprintf("the service's Kubernetes credentials (%s) may not %s", user, perm),
		Hint: fmt.Sprintf("grant verb %q on %s to that ServiceAccount in a %s bound to it: the Helm chart's roles do (charts/service/templates/rbac.yaml, <release>-dataplane for the data plane that serves the API); upgrade the chart or add the rule",
			verb, denied.qualified(), role)}
}

// statusMessage is the apiserver's message without the wrapping.
func statusMessage(err error) string {
	var se apierrors.APIStatus
	if errors.As(err, &se) && se.Status().Message != "" {
		return se.Status().Message
	}
	return err.Error()
}

// isNetError is a transport failure reaching the apiserver.
func isNetError(err error) bool {
	var ne net.Error
	var st apierrors.APIStatus
	return errors.As(err, &ne) && !errors.As(err, &st)
}
