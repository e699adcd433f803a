// Package store declares the object store the REST API, the controllers and the
// node read and write, and the rules every driver shares (manager ownership,
// preconditions, size cap). Drivers live in subpackages: sqlite and kube.
package store

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// MaxObjectBytes is the largest object (JSON encoded) any driver stores.
const MaxObjectBytes = 1536 * 1024

// Manager names who owns an object: "api", "file:<path>", "integration:<name>",
// or "kubernetes" for objects written straight to the cluster.
type Manager string

const (
	ManagerAPI        Manager = "api"
	ManagerKubernetes Manager = "kubernetes"
)

// ManagerAnnotation records an object's manager.
const ManagerAnnotation = "service.io/managed-by"

// Result of one apply.
type Result string

const (
	Created   Result = "created"
	Updated   Result = "updated"
	Unchanged Result = "unchanged"
)

// ApplyOptions qualify an apply.
type ApplyOptions struct {
	// Manager applies the object; an object owned by another manager is refused
	// with a *ManagedByError.
	Manager Manager
	// ResourceVersion, when set, must equal the stored version (ErrPrecondition).
	ResourceVersion string
}

// ApplyResult reports what one apply did.
type ApplyResult struct {
	Result          Result
	ResourceVersion string
	Object          *unstructured.Unstructured
}

// ListOptions select and page objects of one kind.
type ListOptions struct {
	Kind      string
	Namespace string // empty: every namespace
	Selector  labels.Selector
	Limit     int    // 0: no limit
	Continue  string // opaque token from the previous page
}

// ListResult is one page.
type ListResult struct {
	Items           []*unstructured.Unstructured
	Continue        string // empty on the last page
	ResourceVersion string
}

// DeleteOptions qualify a delete.
type DeleteOptions struct {
	Manager         Manager
	ResourceVersion string
}

// EventType is what happened to an object.
type EventType string

const (
	Added    EventType = "ADDED"
	Modified EventType = "MODIFIED"
	Deleted  EventType = "DELETED"
)

// Event is one change seen by a watch.
type Event struct {
	Type   EventType
	Object *unstructured.Unstructured
}

// WatchOptions select the changes a watch delivers.
type WatchOptions struct {
	Kind string // empty: every kind
	// ResourceVersion: deliver changes after this version; empty delivers the
	// current objects as Added events first, then changes.
	ResourceVersion string
}

// Store is what every driver provides. Kinds are the Kind names of
// service.io/v1alpha1 (DNSZone, DNSRecordSet, ..., LocalUser, APIToken, ...).
type Store interface {
	Get(ctx context.Context, kind, namespace, name string) (*unstructured.Unstructured, error)
	List(ctx context.Context, opts ListOptions) (ListResult, error)
	// Apply creates or replaces spec, labels and annotations of an object; status
	// is kept. Generation grows only when spec changes.
	Apply(ctx context.Context, obj *unstructured.Unstructured, opts ApplyOptions) (ApplyResult, error)
	// UpdateStatus replaces the status of a stored object only.
	UpdateStatus(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error)
	Delete(ctx context.Context, kind, namespace, name string, opts DeleteOptions) error
	Watch(ctx context.Context, opts WatchOptions) (<-chan Event, error)
	Close() error
}

// Errors every driver returns, tested with errors.Is / errors.As.
var (
	ErrNotFound     = errors.New("not found")
	ErrConflict     = errors.New("conflict")
	ErrPrecondition = errors.New("precondition failed")
	ErrTooLarge     = errors.New("object too large")
	ErrInvalid      = errors.New("invalid object")
)

// ManagedByError refuses a change to an object owned by another manager.
type ManagedByError struct{ Owner Manager }

func (e *ManagedByError) Error() string {
	return fmt.Sprintf("object is managed by %s", e.Owner)
}
