// Package v1alpha1 holds the object model of the service: every stored kind of the
// group service.io/v1alpha1, used alike by the sqlite and kube store drivers.
// +kubebuilder:object:generate=true
// +groupName=service.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/svcdns/svc/api/v1alpha1/iam"
)

// GroupVersion is the group and version of every kind in this package.
var GroupVersion = schema.GroupVersion{Group: "service.io", Version: "v1alpha1"}

// AddToScheme registers every kind of the group with a scheme: the CRD kinds of
// this package and the internal kinds of package iam, which share the group
// version, so one scheme knows every stored kind.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, knownTypes()...)
	metav1AddToGroupVersion(s)
	return iam.AddToScheme(s)
}
