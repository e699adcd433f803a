// Package iam holds the internal kinds of the group service.io/v1alpha1: local
// users, API tokens, service accounts, role bindings and identity providers.
// They are never installed as CRDs (the kube driver stores them as Secrets
// labelled service.io/kind); their CRD-shaped schemas are generated into
// config/crd/internal for in-process validation only.
// +kubebuilder:object:generate=true
// +groupName=service.io
// +versionName=v1alpha1
package iam

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the group and version of every kind in this package; the
// same as the public kinds'.
var GroupVersion = schema.GroupVersion{Group: "service.io", Version: "v1alpha1"}

// AddToScheme registers the internal kinds with a scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&LocalUser{}, &LocalUserList{},
		&APIToken{}, &APITokenList{},
		&ServiceAccount{}, &ServiceAccountList{},
		&RoleBinding{}, &RoleBindingList{},
		&IdentityProvider{}, &IdentityProviderList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
