package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClientGroup names a set of DNS clients. A client is a member when any of its
// address, client ID or client name matches. Policies, zone query access,
// record views and unblock requests refer to groups by name.
//
// The status subresource is an addition to the interface spec's table (it
// lists none for ClientGroup): the controller writes member counts, the
// policies that select the group and a Ready condition (docs/policies.md).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,categories=service-dns,shortName=cg;clientgroup
// +kubebuilder:printcolumn:name="MEMBERS",type=integer,JSONPath=`.status.members`
// +kubebuilder:printcolumn:name="POLICIES",type=string,JSONPath=`.status.policies`
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`
type ClientGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ClientGroupSpec `json:"spec"`
	// +optional
	Status ClientGroupStatus `json:"status,omitempty"`
}

// ClientGroupStatus is what the ClientGroup controller observed.
type ClientGroupStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Members counts the members that identify clients: valid addresses and
	// prefixes, client IDs and names (invalid members are not counted).
	// +optional
	Members int64 `json:"members,omitempty"`
	// Addresses, ClientIDs and Names count the valid members of each list.
	// +optional
	Addresses int64 `json:"addresses,omitempty"`
	// +optional
	ClientIDs int64 `json:"clientIDs,omitempty"`
	// +optional
	Names int64 `json:"names,omitempty"`
	// Invalid counts members that match nobody (e.g. a malformed address).
	// +optional
	Invalid int64 `json:"invalid,omitempty"`
	// Policies are the Policies ("namespace/name", sorted, at most 100) whose
	// clientGroupRefs name the group.
	// +optional
	// +kubebuilder:validation:MaxItems=100
	Policies []string `json:"policies,omitempty"`
	// Conditions: Ready (False with reason InvalidMembers or TooManyGroups
	// when members are ignored) and Referenced (False, reason NoPolicy, when
	// no Policy names the group).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
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
