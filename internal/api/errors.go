package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/svcdns/svc/internal/store"
)

// Stable error keys of the spec.
const (
	KeyInvalid                = "invalid"
	KeyUnauthenticated        = "unauthenticated"
	KeyForbidden              = "forbidden"
	KeyCSRF                   = "csrf"
	KeyPasswordChangeRequired = "password_change_required"
	KeyAccountDisabled        = "account_disabled"
	KeyLocalLoginDisabled     = "local_login_disabled"
	KeyLocalLoginAdminsOnly   = "local_login_admins_only"
	KeyNotFound               = "not_found"
	KeyConflict               = "conflict"
	KeyManagedBy              = "managed_by"
	KeyDefaultZone            = "default_zone"
	KeyZoneNotEmpty           = "zone_not_empty"
	KeyPreconditionFailed     = "precondition_failed"
	KeyRateLimited            = "rate_limited"
	KeyUnprocessable          = "unprocessable"
	KeyTooLarge               = "too_large"
	KeyReadOnly               = "read_only"
	KeyHostOnly               = "host_only"
	KeyEnvLocked              = "env_locked"
	KeyNotImplemented         = "not_implemented"
	KeyUnavailable            = "unavailable"
	KeyInternal               = "internal"
)

// ErrorDetail is the error member of every error body.
type ErrorDetail struct {
	Key     string `json:"key" doc:"Stable error key"`
	Message string `json:"message"`
	Hint    string `json:"hint"`
	// Missing names the permission a 403 lacked.
	Missing string `json:"missing,omitempty"`
	// Objects lists every refused object when several were sent.
	Objects []ApplyResult `json:"objects,omitempty"`
}

// Error is the body of every error answer: {error:{key,message,hint}, took_ms}.
type Error struct {
	Detail ErrorDetail `json:"error"`
	TookMS float64     `json:"took_ms"`

	status  int
	headers http.Header
	// cause is the error the answer was made from; it is logged under the
	// request id (never shown) when the fault is the server's.
	cause error
	// serverFault marks answers caused by the service, not the caller: every
	// 5xx and the refusals of the service's own Kubernetes credentials.
	serverFault bool
}

func (e *Error) Error() string { return e.Detail.Key + ": " + e.Detail.Message }

// GetStatus satisfies huma.StatusError.
func (e *Error) GetStatus() int { return e.status }

// GetHeaders satisfies huma.HeadersError (WWW-Authenticate, Retry-After).
func (e *Error) GetHeaders() http.Header { return e.headers }

func (e *Error) setTook(ms float64) { e.TookMS = ms }

// withCause records why the answer was made, for the log.
func (e *Error) withCause(err error) *Error {
	e.cause = err
	return e
}

// newErr builds an error answer.
func newErr(status int, key, msg, hint string) *Error {
	e := &Error{status: status, Detail: ErrorDetail{Key: key, Message: msg, Hint: hint}, serverFault: serverFaultStatus(status)}
	switch status {
	case http.StatusUnauthorized:
		e.headers = http.Header{"Www-Authenticate": {`Bearer realm="service", Cookie`}}
	}
	return e
}

// serverFaultStatus: every 5xx but 501, a designed answer (the route is not
// available on this node), is the server's fault.
func serverFaultStatus(status int) bool {
	return status >= 500 && status != http.StatusNotImplemented
}

func errInvalid(format string, a ...any) *Error {
	return newErr(http.StatusBadRequest, KeyInvalid, fmt.Sprintf(format, a...), "")
}

func errNotFound(what string) *Error {
	return newErr(http.StatusNotFound, KeyNotFound, what+" not found", "")
}

func errUnauthenticated() *Error {
	return newErr(http.StatusUnauthorized, KeyUnauthenticated, "authentication required", "log in or send a valid API token")
}

func errForbidden(missing string) *Error {
	e := newErr(http.StatusForbidden, KeyForbidden, "permission "+missing+" is required", forbiddenHint(missing))
	e.Detail.Missing = missing
	return e
}

func errRateLimited(retry time.Duration) *Error {
	secs := int(retry.Seconds() + 0.999)
	secs = max(secs, 1)
	e := newErr(http.StatusTooManyRequests, KeyRateLimited, "too many requests", "retry after "+strconv.Itoa(secs)+" seconds")
	e.headers = http.Header{"Retry-After": {strconv.Itoa(secs)}}
	return e
}

func errInternal() *Error {
	return newErr(http.StatusInternalServerError, KeyInternal, "internal error", "the server log has details under the request id")
}

// keyedError lets other packages (settings, data plane, store drivers) name
// a stable key without importing this package.
type keyedError interface{ ErrorKey() string }

// Optional methods of a keyedError that shape the answer further (the kube
// store's apiserver refusals implement them all).
type (
	statusError     interface{ HTTPStatus() int }
	hintError       interface{ ErrorHint() string }
	missingError    interface{ MissingPermission() string }
	retryAfterError interface{ RetryAfter() time.Duration }
	// serverFaultError is true when the service, not the caller, is at
	// fault (e.g. its own credentials lack a permission): logged at ERROR.
	serverFaultError interface{ ServerFault() bool }
	// messageError gives the message to show instead of the whole wrapped
	// chain of err.Error().
	messageError interface{ ErrorMessage() string }
)

// statusOfKey gives the status of keys whose status the spec leaves open.
var statusOfKey = map[string]int{
	KeyInvalid: 400, KeyUnprocessable: 422, KeyTooLarge: 413, KeyReadOnly: 409,
	KeyHostOnly: 409, KeyEnvLocked: 409, KeyNotImplemented: 501, KeyUnavailable: 503,
	KeyInternal: 500, KeyNotFound: 404, KeyConflict: 409, KeyForbidden: 403,
	KeyPreconditionFailed: 412, KeyRateLimited: 429, KeyUnauthenticated: 401,
}

// fromError maps errors of the store and of services to an answer; anything
// unknown is an internal error whose text is not shown to the caller but is
// logged under the request id (the answer keeps err as its cause).
func fromError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return mapError(err).withCause(err)
}

func mapError(err error) *Error {
	var ke keyedError
	if errors.As(err, &ke) {
		// Checked first: a driver's refusal may also wrap a store sentinel.
		return fromKeyed(err, ke)
	}
	var mb *store.ManagedByError
	switch {
	case errors.As(err, &mb):
		return newErr(http.StatusConflict, KeyManagedBy, err.Error(), "change it through its owner "+string(mb.Owner))
	case errors.Is(err, store.ErrNotFound):
		return newErr(http.StatusNotFound, KeyNotFound, err.Error(), "")
	case errors.Is(err, store.ErrPrecondition):
		return newErr(http.StatusPreconditionFailed, KeyPreconditionFailed, err.Error(), "read the object again and retry with its resourceVersion")
	case errors.Is(err, store.ErrConflict):
		return newErr(http.StatusConflict, KeyConflict, err.Error(), "retry")
	case errors.Is(err, store.ErrTooLarge):
		return newErr(http.StatusRequestEntityTooLarge, KeyTooLarge, err.Error(), "objects are limited to 1.5 MiB")
	case errors.Is(err, store.ErrInvalid):
		return newErr(http.StatusBadRequest, KeyInvalid, err.Error(), "")
	case errors.Is(err, store.ErrZoneNotEmpty):
		return newErr(http.StatusConflict, KeyZoneNotEmpty, err.Error(), "delete the record sets first, or use DELETE /zones/{zone}")
	case errors.Is(err, store.ErrDefaultZone):
		return newErr(http.StatusConflict, KeyDefaultZone, err.Error(), "")
	case errors.Is(err, context.DeadlineExceeded):
		return newErr(http.StatusServiceUnavailable, KeyUnavailable, "timed out", "retry later")
	}
	return errInternal()
}

// fromKeyed answers an error that names its key, with the status, hint,
// missing permission and Retry-After it may also name.
func fromKeyed(err error, ke keyedError) *Error {
	key := ke.ErrorKey()
	st, ok := statusOfKey[key]
	if !ok {
		st = http.StatusConflict
	}
	if se, ok := ke.(statusError); ok && se.HTTPStatus() >= 400 {
		st = se.HTTPStatus()
	}
	msg := err.Error()
	if me, ok := ke.(messageError); ok {
		msg = me.ErrorMessage()
	}
	hint := ""
	if he, ok := ke.(hintError); ok {
		hint = he.ErrorHint()
	}
	e := newErr(st, key, msg, hint)
	if me, ok := ke.(missingError); ok {
		e.Detail.Missing = me.MissingPermission()
	}
	if re, ok := ke.(retryAfterError); ok && re.RetryAfter() > 0 {
		e.headers = http.Header{"Retry-After": {strconv.Itoa(max(int(re.RetryAfter().Seconds()+0.999), 1))}}
	}
	if fe, ok := ke.(serverFaultError); ok && fe.ServerFault() {
		e.serverFault = true
	}
	return e
}

// humaErrorOnce installs the error constructor once per process. huma offers
// no per-API hook for its error type, only this package variable; the
// function installed is pure, so every API in the process agrees.
var humaErrorOnce sync.Once

func installHumaErrors() {
	humaErrorOnce.Do(func() {
		huma.NewError = func(status int, msg string, errs ...error) huma.StatusError {
			return humaError(status, msg, errs...)
		}
	})
}

// humaError turns huma's own errors (validation, parsing, body size) into
// the service's error body, naming the offending field.
func humaError(status int, msg string, errs ...error) *Error {
	e := humaErrorBody(status, msg, errs...)
	if e.status >= 500 {
		// A handler returned an error of its own (not an *Error): its text
		// is not shown but logged under the request id.
		e.cause = errors.Join(append([]error{errors.New(msg)}, errs...)...)
	}
	return e
}

func humaErrorBody(status int, msg string, errs ...error) *Error {
	var parts []string
	for _, err := range errs {
		if err == nil {
			continue
		}
		var ed huma.ErrorDetailer
		if errors.As(err, &ed) {
			d := ed.ErrorDetail()
			if d.Location != "" {
				parts = append(parts, d.Location+": "+d.Message)
			} else {
				parts = append(parts, d.Message)
			}
			continue
		}
		parts = append(parts, err.Error())
	}
	full := msg
	if len(parts) > 0 {
		full = strings.Join(parts, "; ")
		if len(full) > 2000 {
			full = full[:2000] + "..."
		}
	}
	switch {
	case status == http.StatusUnprocessableEntity || status == http.StatusBadRequest:
		return newErr(http.StatusBadRequest, KeyInvalid, full, "")
	case status == http.StatusRequestEntityTooLarge:
		return newErr(status, KeyTooLarge, full, "")
	case status == http.StatusNotFound:
		return newErr(status, KeyNotFound, full, "")
	case status == http.StatusUnsupportedMediaType || status == http.StatusNotAcceptable:
		return newErr(status, KeyInvalid, full, "")
	case status == http.StatusPreconditionFailed:
		return newErr(status, KeyPreconditionFailed, full, "")
	case status >= 500 || status == 0:
		if status == 0 {
			status = http.StatusInternalServerError
		}
		return newErr(status, KeyInternal, "internal error", "")
	}
	return newErr(status, KeyInvalid, full, "")
}

// writeError writes an error body outside huma (middleware, unknown routes).
func writeError(w http.ResponseWriter, r *http.Request, e *Error) {
	e.TookMS = tookMS(r.Context())
	noteAnswer(r.Context(), e)
	for k, vs := range e.headers {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.status)
	_ = json.NewEncoder(w).Encode(e)
}

type startKey struct{}

func tookMS(ctx context.Context) float64 {
	if t, ok := ctx.Value(startKey{}).(time.Time); ok {
		return float64(time.Since(t).Microseconds()) / 1000
	}
	return 0
}

// tookSetter is implemented by every body carrying took_ms.
type tookSetter interface{ setTook(float64) }
