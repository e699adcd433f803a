package store

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Key names one stored object. Namespace is empty for cluster-scoped kinds.
type Key struct {
	Kind, Namespace, Name string
}

// KeyOf returns the key of obj.
func KeyOf(obj *unstructured.Unstructured) Key {
	return Key{Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

func (k Key) String() string {
	if k.Namespace == "" {
		return k.Kind + "/" + k.Name
	}
	return k.Kind + "/" + k.Namespace + "/" + k.Name
}

// WriteOp is what one Write does.
type WriteOp int

const (
	// OpCreate stores a new object; an existing one fails the batch with ErrConflict.
	OpCreate WriteOp = iota + 1
	// OpUpdate replaces a stored object whose version is Write.ResourceVersion.
	OpUpdate
	// OpDelete removes a stored object whose version is Write.ResourceVersion.
	OpDelete
)

// Write is one change of a Driver.Write batch.
type Write struct {
	Op  WriteOp
	Key Key
	// Object is the whole object to store (create and update); the driver sets
	// its resourceVersion.
	Object *unstructured.Unstructured
	// ResourceVersion is the stored version an update or delete replaces; when
	// the stored object has another one the batch fails with ErrConflict.
	ResourceVersion string
}

// Driver is the raw storage under a Store: it keeps objects as given, numbers
// versions and feeds watches. Ownership, generation, defaulting, validation
// and the zone rules live above it in New, so every driver shares them.
type Driver interface {
	// Get returns the stored object or ErrNotFound.
	Get(ctx context.Context, key Key) (*unstructured.Unstructured, error)
	// List returns one page of objects of opts.Kind ordered by namespace, name.
	List(ctx context.Context, opts ListOptions) (ListResult, error)
	// Write commits every write or none; it returns the stored objects in the
	// order of writes (nil for deletes). A failed precondition is ErrConflict.
	Write(ctx context.Context, writes []Write) ([]*unstructured.Unstructured, error)
	// Watch follows committed changes as Store.Watch does.
	Watch(ctx context.Context, opts WatchOptions) (<-chan Event, error)
	Close() error
}
