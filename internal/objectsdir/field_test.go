package objectsdir

import (
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcdns/svc/internal/store"
)

func TestFieldOf(t *testing.T) {
	status := apierrors.NewInvalid(schema.GroupKind{Group: "service.io", Kind: "DNSRecordSet"}, "www",
		field.ErrorList{field.Required(field.NewPath("spec", "zoneRef", "name"), "")})
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"schema validator", fmt.Errorf("apply x: %w: %w", store.ErrInvalid, status), "spec.zoneRef.name"},
		{"plain message", fmt.Errorf("apply x: %w: spec.endpoints[0].targets: Required value", store.ErrInvalid), "spec.endpoints[0].targets"},
		{"not invalid", errors.New("spec.x: boom"), ""},
		{"no field", fmt.Errorf("%w: apply needs a manager", store.ErrInvalid), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := fieldOf(tc.err); got != tc.want {
				t.Fatalf("fieldOf(%v) = %q, want %q", tc.err, got, tc.want)
			}
		})
	}
}
