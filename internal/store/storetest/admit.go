package storetest

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/svcdns/svc/internal/store"
)

// SchemaLite is a small real Admitter for store tests until they can use
// internal/validation: it defaults and checks the few DNSZone and DNSRecordSet
// fields the suite relies on, with field-naming messages.
type SchemaLite struct{}

var _ store.Admitter = SchemaLite{}

func invalid(field, msg string) error {
	return fmt.Errorf("%w: %s: %s", store.ErrInvalid, field, msg)
}

// Admit implements store.Admitter.
func (SchemaLite) Admit(_ context.Context, obj, old *unstructured.Unstructured) error {
	if obj.GetAPIVersion() != "service.io/v1alpha1" {
		return invalid("apiVersion", fmt.Sprintf("Unsupported value: %q", obj.GetAPIVersion()))
	}
	if obj.GetName() == "" {
		return invalid("metadata.name", "Required value")
	}
	switch obj.GetKind() {
	case store.KindDNSZone:
		if obj.GetNamespace() != "" {
			return invalid("metadata.namespace", "Forbidden: DNSZone is cluster-scoped")
		}
		if _, ok, _ := unstructured.NestedString(obj.Object, "spec", "type"); !ok {
			_ = unstructured.SetNestedField(obj.Object, "primary", "spec", "type")
		}
		if t, _, _ := unstructured.NestedString(obj.Object, "spec", "type"); t != "primary" && t != "forward" {
			return invalid("spec.type", fmt.Sprintf("Unsupported value: %q", t))
		}
		if _, ok, _ := unstructured.NestedFieldNoCopy(obj.Object, "spec", "defaultTTL"); !ok {
			_ = unstructured.SetNestedField(obj.Object, int64(3600), "spec", "defaultTTL")
		}
	case store.KindDNSRecordSet:
		if obj.GetNamespace() == "" {
			return invalid("metadata.namespace", "Required value")
		}
		ref, _, _ := unstructured.NestedString(obj.Object, "spec", "zoneRef", "name")
		if ref == "" {
			return invalid("spec.zoneRef.name", "Required value")
		}
		if old != nil {
			if was, _, _ := unstructured.NestedString(old.Object, "spec", "zoneRef", "name"); was != ref {
				return invalid("spec.zoneRef", "Invalid value: zoneRef is immutable")
			}
		}
		eps, ok, err := unstructured.NestedSlice(obj.Object, "spec", "endpoints")
		if err != nil || !ok {
			return invalid("spec.endpoints", "Required value")
		}
		if len(eps) > 1000 {
			return invalid("spec.endpoints", "Too many: must have at most 1000 items")
		}
		for i, ep := range eps {
			m, _ := ep.(map[string]any)
			if s, _ := m["dnsName"].(string); s == "" {
				return invalid(fmt.Sprintf("spec.endpoints[%d].dnsName", i), "Required value")
			}
			if s, _ := m["recordType"].(string); s == "" {
				return invalid(fmt.Sprintf("spec.endpoints[%d].recordType", i), "Required value")
			}
			if t, _ := m["targets"].([]any); len(t) == 0 {
				return invalid(fmt.Sprintf("spec.endpoints[%d].targets", i), "Required value")
			}
		}
	}
	return nil
}
