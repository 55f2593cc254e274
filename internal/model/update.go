package model

import "net/netip"

// Update is one change of the cluster or host state, fed to internal/graph. Set updates are
// whole-object upserts; Deleted updates name the object. An update is handed over: once sent,
// neither its sender nor its receiver modifies the maps and slices it holds, so the receiver
// keeps them without copying (a copy would cost an allocation per map and slice of every update).
type Update interface{ isUpdate() }

type EndpointSet struct{ Endpoint Endpoint }
type EndpointDeleted struct{ Key EndpointKey }
type NamespaceSet struct{ Namespace Namespace }
type NamespaceDeleted struct{ Name string }
type ServiceAccountSet struct{ ServiceAccount ServiceAccount }
type ServiceAccountDeleted struct{ Namespace, Name string }
type PolicySet struct{ Policy Policy }
type PolicyDeleted struct{ Key PolicyKey }
type NetworkSetSet struct{ NetworkSet NetworkSet }
type NetworkSetDeleted struct{ Key NetworkSetKey }
type TierSet struct{ Tier Tier }
type TierDeleted struct{ Name string }

// RouteSet says that Dst (a local pod's address as a host route) leaves through host Interface.
// It comes from internal/ifmon.
type RouteSet struct {
	Dst       netip.Prefix
	Interface string
}
type RouteDeleted struct{ Dst netip.Prefix }

// HostAddrSet / HostAddrDeleted: an address assigned to the host (node) itself, on its
// interface Interface (one update per interface holding it).
type HostAddrSet struct {
	Addr      netip.Addr
	Interface string
}
type HostAddrDeleted struct {
	Addr      netip.Addr
	Interface string
}

// SourceVersion says that a source has delivered every change of one resource up to its
// ResourceVersion (the API server's list/watch position: etcd's revision). It changes no state;
// the agent publishes, after each commit, the versions the programmed table reflects.
type SourceVersion struct{ Resource, ResourceVersion string }

// SyncStatus reports the progress of a source.
type SyncStatus uint8

const (
	WaitingForDatastore SyncStatus = iota
	ResyncInProgress
	InSync
)

func (s SyncStatus) String() string {
	switch s {
	case ResyncInProgress:
		return "resyncing"
	case InSync:
		return "in-sync"
	}
	return "waiting"
}

type SyncStatusUpdate struct{ Status SyncStatus }

func (EndpointSet) isUpdate()           {}
func (EndpointDeleted) isUpdate()       {}
func (NamespaceSet) isUpdate()          {}
func (NamespaceDeleted) isUpdate()      {}
func (ServiceAccountSet) isUpdate()     {}
func (ServiceAccountDeleted) isUpdate() {}
func (PolicySet) isUpdate()             {}
func (PolicyDeleted) isUpdate()         {}
func (NetworkSetSet) isUpdate()         {}
func (NetworkSetDeleted) isUpdate()     {}
func (TierSet) isUpdate()               {}
func (TierDeleted) isUpdate()           {}
func (RouteSet) isUpdate()              {}
func (RouteDeleted) isUpdate()          {}
func (HostAddrSet) isUpdate()           {}
func (HostAddrDeleted) isUpdate()       {}
func (SyncStatusUpdate) isUpdate()      {}
func (SourceVersion) isUpdate()         {}
