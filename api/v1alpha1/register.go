package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// knownTypes lists every CRD kind of the group with its list type. Add new kinds here.
func knownTypes() []runtime.Object {
	return []runtime.Object{
		&DNSZone{}, &DNSZoneList{},
		&DNSRecordSet{}, &DNSRecordSetList{},
		&BlockList{}, &BlockListList{},
		&ClientGroup{}, &ClientGroupList{},
		&Policy{}, &PolicyList{},
		&UnblockRequest{}, &UnblockRequestList{},
	}
}

func metav1AddToGroupVersion(s *runtime.Scheme) { metav1.AddToGroupVersion(s, GroupVersion) }
