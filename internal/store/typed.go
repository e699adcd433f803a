package store

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
)

// ListTyped lists every object of kind in namespace ns ("" = every
// namespace), page by page, decoded into T (the api/v1alpha1 type).
func ListTyped[T any](ctx context.Context, st Store, kind, ns string) ([]T, error) {
	var out []T
	opts := ListOptions{Kind: kind, Namespace: ns, Limit: 500}
	for {
		page, err := st.List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", kind, err)
		}
		for _, u := range page.Items {
			var v T
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &v); err != nil {
				return nil, fmt.Errorf("decode %s %s: %w", kind, KeyOf(u), err)
			}
			out = append(out, v)
		}
		if page.Continue == "" {
			return out, nil
		}
		opts.Continue = page.Continue
	}
}
