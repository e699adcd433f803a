package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClientGroup names a set of DNS clients. A client is a member when any of its
// address, client ID or client name matches. Policies, zone query access,
// record views and unblock requests refer to groups by name.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,categories=service-dns,shortName=cg;clientgroup
type ClientGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ClientGroupSpec `json:"spec"`
}

// ClientGroupSpec lists the members of a group. Every list is optional; a group
// with no members matches nobody.
type ClientGroupSpec struct {
	// Description is free text shown in the dashboard.
	// +optional
	// +kubebuilder:validation:MaxLength=500
	Description string `json:"description,omitempty"`
	// Addresses are client IP addresses ("192.0.2.7", "2001:db8::7") or CIDR
	// prefixes ("192.0.2.0/24"), matched against the client address after PROXY
	// protocol and trusted-proxy handling.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=4096
	// +kubebuilder:validation:items:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.all(a, isIP(a) || isCIDR(a))",message="every address must be an IP address or a CIDR prefix"
	Addresses []string `json:"addresses,omitempty"`
	// ClientIDs are client identifiers sent as the first label of the DoT/DoQ
	// server name ("<id>.dns.example.com") or as the DoH path segment
	// ("/dns-query/<id>"). Lower-case letters, digits and hyphens.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`
	ClientIDs []string `json:"clientIDs,omitempty"`
	// Names are client names: host names learned from reverse lookups or DHCP
	// leases, matched case-insensitively, without a trailing dot.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	Names []string `json:"names,omitempty"`
}

// +kubebuilder:object:root=true

// ClientGroupList is a list of ClientGroup.
type ClientGroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClientGroup `json:"items"`
}
