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
	// DryRun runs every check (ownership, precondition, defaulting, validation,
	// size) and reports the result without storing anything.
	DryRun bool
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
	// Fresh reads the source of truth rather than a cache, with a version a
	// watch can resume from now (the kube driver: a LIST from the
	// apiserver, every page at once; its caches' versions can be older
	// than a restarted apiserver keeps). Drivers without a cache ignore it.
	Fresh bool
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
	// Err is set on an Error event only.
	Err error
	// Objects is set on a Synced event only (Follow).
	Objects []*unstructured.Unstructured
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
	// Watch delivers changes until ctx ends (the channel is then closed) or the
	// watch fails (an Error event, then the channel is closed).
	Watch(ctx context.Context, opts WatchOptions) (<-chan Event, error)
	ZoneDeleter
	BatchApplier
	Close() error
}

// BatchApplier writes several objects all or nothing.
type BatchApplier interface {
	// ApplyBatch applies objs (each as Apply does, results in their order)
	// and deletes dels in one all-or-nothing write.
	ApplyBatch(ctx context.Context, objs []*unstructured.Unstructured, dels []Key, opts ApplyOptions) ([]ApplyResult, error)
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

// More errors every driver returns.
var (
	// ErrZoneNotEmpty refuses deleting a DNSZone still referenced by record sets.
	ErrZoneNotEmpty = errors.New("zone still referenced by record sets")
	// ErrDefaultZone refuses deleting the default (root) zone.
	ErrDefaultZone = errors.New("the default zone cannot be deleted")
	// ErrExpired answers a watch from a version older than the retained change
	// log; the watcher lists again and watches from the list's version.
	ErrExpired = errors.New("resource version too old")
	// ErrClosed answers calls on a closed store.
	ErrClosed = errors.New("store closed")
)

// Error is the Type of the last event of a watch that ended with an error
// (Event.Err says why, e.g. ErrExpired when the watcher fell behind the
// retained change log); the channel is
// closed right after it.
const Error EventType = "ERROR"

// Admitter defaults and validates objects before they are stored. It is
// implemented by internal/validation from the CRD schemas.
type Admitter interface {
	// Admit defaults obj in place and validates it against its kind's schema;
	// old is the stored object on update (nil on create) for transition rules.
	Admit(ctx context.Context, obj, old *unstructured.Unstructured) error
}

// DeleteZoneOptions qualify DeleteZone.
type DeleteZoneOptions struct {
	// Manager deletes; the zone or a record set owned by another manager refuses
	// the whole delete with a *ManagedByError.
	Manager Manager
	// DryRun counts what would be deleted and deletes nothing.
	DryRun bool
}

// DeleteZoneResult counts what a zone delete removed (or would remove).
type DeleteZoneResult struct {
	RecordSets int // DNSRecordSet objects referencing the zone
	Records    int // sum of the endpoints' targets of those record sets
}

// ZoneDeleter deletes a DNSZone together with its record sets.
type ZoneDeleter interface {
	// DeleteZone deletes the DNSZone object named name and every DNSRecordSet
	// whose spec.zoneRef.name is name, all or nothing.
	DeleteZone(ctx context.Context, name string, opts DeleteZoneOptions) (DeleteZoneResult, error)
}

// Kinds the store treats specially.
const (
	KindDNSZone      = "DNSZone"
	KindDNSRecordSet = "DNSRecordSet"
	// DefaultZoneName is the object name of the default zone ".".
	DefaultZoneName = "root"
)
