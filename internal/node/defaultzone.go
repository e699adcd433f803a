package node

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/svcdns/svc/internal/store"
)

// DefaultZoneName is the object name of the root zone ".", the default zone:
// Kubernetes object names cannot be ".".
const DefaultZoneName = "root"

// ensureDefaultZone creates the default zone on first start. A racing node that
// created it first wins; its object is kept.
func ensureDefaultZone(ctx context.Context, st store.Store) error {
	_, err := st.Get(ctx, "DNSZone", "", DefaultZoneName)
	if err == nil {
		return nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("read default zone: %w", err)
	}
	z := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "service.io/v1alpha1",
		"kind":       "DNSZone",
		"metadata":   map[string]any{"name": DefaultZoneName},
		"spec":       map[string]any{"zoneName": "."},
	}}
	if _, err := st.Apply(ctx, z, store.ApplyOptions{Manager: store.ManagerAPI}); err != nil {
		var mb *store.ManagedByError
		if errors.As(err, &mb) || errors.Is(err, store.ErrConflict) {
			return nil
		}
		return fmt.Errorf("create default zone: %w", err)
	}
	return nil
}
