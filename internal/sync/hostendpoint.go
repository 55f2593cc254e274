package sync

import (
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nftpolicy/nftpolicy/internal/model"
)

// CalicoDefaultAllowProfile is Calico's profile that allows all traffic: a host endpoint
// carrying it allows what no policy decides.
const CalicoDefaultAllowProfile = "projectcalico-default-allow"

// ConvertHostEndpoint converts a HostEndpoint into an endpoint of namespace "" with its Host
// part, as Felix reads one:
//
//   - spec.node is required; spec.interfaceName names one interface of the node, or "*" for
//     all of them. Without it, the endpoint applies to the interface holding its expected IPs
//     (the node's graph resolves it), which it then needs.
//   - spec.expectedIPs (addresses) are what rule selectors picking the endpoint match.
//   - spec.profiles: projectcalico-default-allow makes traffic no policy decides allowed;
//     other profiles are not applied (reported in ignored), so such traffic is denied.
//   - spec.ports are named ports, as a pod's containers declare them.
func ConvertHostEndpoint(h *HostEndpoint) (model.Endpoint, []string, error) {
	if h.Name == "" {
		return model.Endpoint{}, nil, errors.New("metadata.name is empty")
	}
	spec := &h.Spec
	if spec.Node == "" {
		return model.Endpoint{}, nil, errors.New("spec.node is empty")
	}
	switch ifc := spec.InterfaceName; {
	case ifc == "" && len(spec.ExpectedIPs) == 0:
		return model.Endpoint{}, nil, errors.New("spec.interfaceName is empty and there are no spec.expectedIPs: name the interface, * for all, or the addresses of the interface")
	case ifc != model.HostInterfaceAll && (len(ifc) >= 16 || strings.ContainsAny(ifc, "/ *\x00")):
		return model.Endpoint{}, nil, fmt.Errorf("spec.interfaceName: %q is not an interface name", ifc)
	}
	ep := model.Endpoint{Key: model.EndpointKey{Name: h.Name}, Node: spec.Node, Labels: model.LabelsOf(h.Labels),
		Running: true, Host: &model.HostEndpoint{Interface: spec.InterfaceName}}
	for i, s := range spec.ExpectedIPs {
		a, err := netip.ParseAddr(strings.TrimSpace(s))
		if err != nil {
			return model.Endpoint{}, nil, fmt.Errorf("spec.expectedIPs[%d]: %q is not an address", i, s)
		}
		ep.Addrs = append(ep.Addrs, a.Unmap())
	}
	slices.SortFunc(ep.Addrs, netip.Addr.Compare)
	ep.Addrs = slices.Compact(ep.Addrs)
	var ignored []string
	for _, p := range spec.Profiles {
		if p == CalicoDefaultAllowProfile {
			ep.Host.DefaultAllow = true
			continue
		}
		ignored = append(ignored, fmt.Sprintf("spec.profiles: %q is not applied (only %s is)", p, CalicoDefaultAllowProfile))
	}
	for i, p := range spec.Ports {
		if errs := validation.IsValidPortName(p.Name); len(errs) > 0 {
			return model.Endpoint{}, nil, fmt.Errorf("spec.ports[%d].name: %q: %s", i, p.Name, strings.Join(errs, "; "))
		}
		proto, err := calicoProtocol(p.Protocol)
		if err != nil {
			return model.Endpoint{}, nil, fmt.Errorf("spec.ports[%d].protocol: %w", i, err)
		}
		if p.Port < 1 || p.Port > 65535 {
			return model.Endpoint{}, nil, fmt.Errorf("spec.ports[%d].port: %d is not 1-65535", i, p.Port)
		}
		ep.NamedPorts = append(ep.NamedPorts, model.NamedPort{Name: p.Name, Protocol: proto, Port: uint16(p.Port)})
	}
	return ep, ignored, nil
}

// hostSlot is what two host endpoints may not share: a node's interface. An endpoint without
// interfaceName has a slot of its own (name): the node's graph gives it an interface no other
// endpoint takes.
type hostSlot struct{ node, ifname, name string }

func slotOf(ep *model.Endpoint) hostSlot {
	if ep.Host.Interface == "" {
		return hostSlot{node: ep.Node, name: ep.Key.Name}
	}
	return hostSlot{node: ep.Node, ifname: ep.Host.Interface}
}

// hostClaims decides which host endpoint holds each node's interface when several claim it:
// the one with the smallest name, whatever the order they came in; the others are not
// enforced until it is gone.
type hostClaims struct {
	all    map[string]model.Endpoint        // every valid host endpoint, by name
	bySlot map[hostSlot]map[string]struct{} // the names claiming each slot
}

func newHostClaims() hostClaims {
	return hostClaims{all: map[string]model.Endpoint{}, bySlot: map[hostSlot]map[string]struct{}{}}
}

// put adds or replaces the endpoint of its name, and returns the one it replaced.
func (hc *hostClaims) put(ep model.Endpoint) (model.Endpoint, bool) {
	old, had := hc.remove(ep.Key.Name)
	hc.all[ep.Key.Name] = ep
	s := slotOf(&ep)
	if hc.bySlot[s] == nil {
		hc.bySlot[s] = map[string]struct{}{}
	}
	hc.bySlot[s][ep.Key.Name] = struct{}{}
	return old, had
}

// remove drops the endpoint of name, and returns it.
func (hc *hostClaims) remove(name string) (model.Endpoint, bool) {
	old, had := hc.all[name]
	if had {
		delete(hc.all, name)
		s := slotOf(&old)
		if delete(hc.bySlot[s], name); len(hc.bySlot[s]) == 0 {
			delete(hc.bySlot, s)
		}
	}
	return old, had
}

// holder is the name of the endpoint holding slot s ("" for none): O(claimants of s).
func (hc *hostClaims) holder(s hostSlot) string {
	best := ""
	for name := range hc.bySlot[s] {
		if best == "" || name < best {
			best = name
		}
	}
	return best
}

// AutoHostEndpointName is the name of a node's automatic host endpoint, as Calico's
// kube-controllers name it.
func AutoHostEndpointName(node string) string { return node + "-auto-hep" }

// AutoHostEndpoint is the host endpoint Calico's kube-controllers make of a node: all of its
// interfaces, its labels, its IP addresses expected, and the default-allow profile, so that it
// blocks nothing until a policy selects it.
func AutoHostEndpoint(n *corev1.Node) model.Endpoint {
	return model.Endpoint{Key: model.EndpointKey{Name: AutoHostEndpointName(n.Name)}, Node: n.Name,
		Labels: model.LabelsOf(n.Labels), Addrs: convertNode(n).addrs, Running: true,
		Host: &model.HostEndpoint{Interface: model.HostInterfaceAll, DefaultAllow: true}}
}

// autoHostEndpointLocked follows a node's automatic host endpoint (newObj nil: the node is
// deleted), through the same claims as HostEndpoint objects.
func (w *Watcher) autoHostEndpointLocked(node string, newObj any) {
	n, ok := newObj.(*corev1.Node)
	if !ok {
		w.setHostLocked(AutoHostEndpointName(node), nil)
		return
	}
	ep := AutoHostEndpoint(n)
	w.setHostLocked(ep.Key.Name, &ep)
}

// setHostLocked makes ep the host endpoint of name (nil: there is none) and settles the
// node's interfaces it leaves and claims (settleHostsLocked). An unchanged endpoint changes
// nothing.
func (w *Watcher) setHostLocked(name string, ep *model.Endpoint) {
	hosts := &w.calico.hosts
	if ep == nil {
		if old, had := hosts.remove(name); had {
			delete(w.calico.losing, name)
			w.settleHostsLocked(slotOf(&old))
		}
		return
	}
	if old, had := hosts.all[name]; had && reflect.DeepEqual(old, *ep) {
		return
	}
	var slots []hostSlot
	if old, had := hosts.put(*ep); had && slotOf(&old) != slotOf(ep) {
		slots = append(slots, slotOf(&old)) // first: its withdrawal comes before its claim elsewhere
	}
	w.settleHostsLocked(append(slots, slotOf(ep))...)
}

// settleHostsLocked emits, for each node's interface of slots, the host endpoint holding it
// (hostClaims.holder) and withdraws the one emitted before if another holds it now: an
// endpoint claiming an interface another holds is logged and counted as invalid once, when it
// starts losing, and enforced once the holder is gone.
func (w *Watcher) settleHostsLocked(slots ...hostSlot) {
	for _, s := range slots {
		holder := w.calico.hosts.holder(s)
		cur, had := w.calico.emittedHosts[s]
		if had && cur.Key.Name != holder {
			delete(w.calico.emittedHosts, s)
			w.pushLocked(model.EndpointDeleted{Key: cur.Key})
		}
		for name := range w.calico.hosts.bySlot[s] {
			if _, lost := w.calico.losing[name]; name == holder || lost {
				continue
			}
			w.calico.losing[name] = struct{}{}
			w.log.Warn("host endpoint claims an interface another holds; not enforced", "name", name, "node", s.node,
				"interface", s.ifname, "holder", holder)
			if w.cfg.Metrics != nil {
				w.cfg.Metrics.InvalidObjects.WithLabelValues(calicoKindHostEndpoint).Inc()
			}
		}
		if holder == "" {
			continue
		}
		delete(w.calico.losing, holder)
		ep := w.calico.hosts.all[holder]
		if had && cur.Key.Name == holder && reflect.DeepEqual(cur, ep) {
			continue
		}
		w.calico.emittedHosts[s] = ep
		w.pushLocked(model.EndpointSet{Endpoint: ep})
	}
}
