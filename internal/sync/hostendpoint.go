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
//     all of them. An endpoint without interfaceName (Calico then looks for the interface
//     holding the expected IPs) is not supported: invalid.
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
	case ifc == "":
		return model.Endpoint{}, nil, errors.New("spec.interfaceName is empty: name the interface, or * for all")
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

// hostSlot is what two host endpoints may not share: a node's interface.
type hostSlot struct{ node, ifname string }

func slotOf(ep *model.Endpoint) hostSlot { return hostSlot{ep.Node, ep.Host.Interface} }

// hostClaims decides which host endpoint holds each node's interface when several claim it:
// the one with the smallest name, whatever the order they came in; the others are not
// enforced until it is gone.
type hostClaims struct {
	all map[string]model.Endpoint // every valid host endpoint, by name
}

func newHostClaims() hostClaims { return hostClaims{all: map[string]model.Endpoint{}} }

// holder is the name of the endpoint holding slot s ("" for none).
func (hc *hostClaims) holder(s hostSlot) string {
	best := ""
	for name, ep := range hc.all {
		if slotOf(&ep) == s && (best == "" || name < best) {
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
	name := AutoHostEndpointName(node)
	old, had := w.calico.hosts.all[name]
	var slots []hostSlot
	if had {
		slots = append(slots, slotOf(&old))
		delete(w.calico.hosts.all, name)
	}
	if n, ok := newObj.(*corev1.Node); ok {
		ep := AutoHostEndpoint(n)
		if had && reflect.DeepEqual(old, ep) {
			w.calico.hosts.all[name] = old
			return
		}
		w.calico.hosts.all[name] = ep
		slots = append(slots, slotOf(&ep))
	}
	w.settleHostsLocked(slots...)
}
