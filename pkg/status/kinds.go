package status

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	applyv1alpha1 "github.com/loutres/juneau/pkg/generated/applyconfiguration/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/generated/clientset/versioned"
)

// The status writers of juneau's kinds whose status is applied, each declared once and
// used by every component that writes that kind's status. fieldManager is the writing
// component's (v1alpha1.FieldManagerController or FieldManagerNode); events are the
// conditions it owns whose changes it announces.

// AddressPoolWriter writes AddressPool status.
type AddressPoolWriter = Writer[*applyv1alpha1.AddressPoolApplyConfiguration, *v1alpha1.AddressPool]

// AddressPools is the AddressPool status writer.
func AddressPools(client versioned.Interface, fieldManager string, recorder record.EventRecorder, events ...Announced) AddressPoolWriter {
	return AddressPoolWriter{Kind: "AddressPool", FieldManager: fieldManager, Recorder: recorder, Events: events,
		Client: func(string) Applier[*applyv1alpha1.AddressPoolApplyConfiguration, *v1alpha1.AddressPool] {
			return client.JuneauV1alpha1().AddressPools()
		}}
}

// ExternalNetworkWriter writes ExternalNetwork status.
type ExternalNetworkWriter = Writer[*applyv1alpha1.ExternalNetworkApplyConfiguration, *v1alpha1.ExternalNetwork]

// ExternalNetworks is the ExternalNetwork status writer.
func ExternalNetworks(client versioned.Interface, fieldManager string, recorder record.EventRecorder, events ...Announced) ExternalNetworkWriter {
	return ExternalNetworkWriter{Kind: "ExternalNetwork", FieldManager: fieldManager, Recorder: recorder, Events: events,
		Client: func(string) Applier[*applyv1alpha1.ExternalNetworkApplyConfiguration, *v1alpha1.ExternalNetwork] {
			return client.JuneauV1alpha1().ExternalNetworks()
		}}
}

// ElasticIPAttachmentWriter writes ElasticIPAttachment status.
type ElasticIPAttachmentWriter = Writer[*applyv1alpha1.ElasticIPAttachmentApplyConfiguration, *v1alpha1.ElasticIPAttachment]

// ElasticIPAttachments is the ElasticIPAttachment status writer.
func ElasticIPAttachments(client versioned.Interface, fieldManager string, recorder record.EventRecorder, events ...Announced) ElasticIPAttachmentWriter {
	return ElasticIPAttachmentWriter{Kind: "ElasticIPAttachment", FieldManager: fieldManager, Recorder: recorder, Events: events,
		Client: func(ns string) Applier[*applyv1alpha1.ElasticIPAttachmentApplyConfiguration, *v1alpha1.ElasticIPAttachment] {
			return client.JuneauV1alpha1().ElasticIPAttachments(ns)
		}}
}

// NetworkInterfaceWriter writes NetworkInterface status.
type NetworkInterfaceWriter = Writer[*applyv1alpha1.NetworkInterfaceApplyConfiguration, *v1alpha1.NetworkInterface]

// NetworkInterfaces is the NetworkInterface status writer.
func NetworkInterfaces(client versioned.Interface, fieldManager string, recorder record.EventRecorder, events ...Announced) NetworkInterfaceWriter {
	return NetworkInterfaceWriter{Kind: "NetworkInterface", FieldManager: fieldManager, Recorder: recorder, Events: events,
		Client: func(ns string) Applier[*applyv1alpha1.NetworkInterfaceApplyConfiguration, *v1alpha1.NetworkInterface] {
			return client.JuneauV1alpha1().NetworkInterfaces(ns)
		}}
}

// ARPAdvertisementWriter writes ARPAdvertisement status: its one condition, Answering.
type ARPAdvertisementWriter = Writer[*applyv1alpha1.ARPAdvertisementApplyConfiguration, *v1alpha1.ARPAdvertisement]

// ARPAdvertisements is the ARPAdvertisement status writer. The node agent writes
// Answering True or False for the advertisements of its Node, the controller writes it
// Unknown when that agent stops reporting (docs/arp.md); both through this writer, with
// the one Policy of Answering: every change is announced to a recorder given.
func ARPAdvertisements(client versioned.Interface, fieldManager string, recorder record.EventRecorder) ARPAdvertisementWriter {
	return ARPAdvertisementWriter{Kind: "ARPAdvertisement", FieldManager: fieldManager, Recorder: recorder,
		Events: []Announced{{Type: v1alpha1.ConditionAnswering, Policy: answeringEvents}},
		Client: func(string) Applier[*applyv1alpha1.ARPAdvertisementApplyConfiguration, *v1alpha1.ARPAdvertisement] {
			return client.JuneauV1alpha1().ARPAdvertisements()
		}}
}

// answeringEvents: the agent's own changes are told by its logs (it records no Events);
// the controller's Unknown is a Warning by its reason.
var answeringEvents = Policy{Quiet: metav1.ConditionTrue}

// BGPAdvertisementWriter writes BGPAdvertisement status: its one condition, Announced.
type BGPAdvertisementWriter = Writer[*applyv1alpha1.BGPAdvertisementApplyConfiguration, *v1alpha1.BGPAdvertisement]

// BGPAdvertisements is the BGPAdvertisement status writer (the node agent's Announced).
func BGPAdvertisements(client versioned.Interface, fieldManager string, recorder record.EventRecorder, events ...Announced) BGPAdvertisementWriter {
	return BGPAdvertisementWriter{Kind: "BGPAdvertisement", FieldManager: fieldManager, Recorder: recorder, Events: events,
		Client: func(string) Applier[*applyv1alpha1.BGPAdvertisementApplyConfiguration, *v1alpha1.BGPAdvertisement] {
			return client.JuneauV1alpha1().BGPAdvertisements()
		}}
}
