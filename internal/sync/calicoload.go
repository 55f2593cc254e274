package sync

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nftpolicy/nftpolicy/internal/model"
)

// calicoObjects is what a set of manifests holds of Calico's API besides policies (which go
// to objectSet.policies): its tiers and network sets.
type calicoObjects struct {
	tiers    map[string]model.Tier // by model name; Calico's built-in tiers are not held
	netsets  map[model.NetworkSetKey]model.NetworkSet
	tierName map[model.PolicyKey]string // the Calico tier of each Calico policy, for errors
	hosts    hostClaims
}

func newCalicoObjects() *calicoObjects {
	return &calicoObjects{tiers: map[string]model.Tier{}, netsets: map[model.NetworkSetKey]model.NetworkSet{},
		tierName: map[model.PolicyKey]string{}, hosts: newHostClaims()}
}

// addCalico converts it when it is one of Calico's kinds, and reports whether it was.
func (c *objectSet) addCalico(it sourced) bool {
	partly := func(ignored []string) {
		if len(ignored) > 0 {
			c.errs = append(c.errs, &PartlyEnforcedError{Object: strings.TrimPrefix(it.origin+": ", ": ") + objectName(it.obj), Ignored: ignored})
		}
	}
	policy := func(p model.Policy, tier string, ignored []string, err error) {
		if err != nil {
			c.fail(it, err)
			return
		}
		partly(ignored)
		c.policies[p.Key] = p
		c.calico.tierName[p.Key] = tier
	}
	netset := func(s model.NetworkSet, ignored []string, err error) {
		if err != nil {
			c.fail(it, err)
			return
		}
		partly(ignored)
		c.calico.netsets[s.Key] = s
	}
	switch o := it.obj.(type) {
	case *CalicoTier:
		if !c.take(it, o) {
			return true
		}
		t, builtin, err := ConvertCalicoTier(o)
		switch {
		case err != nil:
			c.fail(it, err)
		case !builtin:
			c.calico.tiers[t.Name] = t
		}
	case *GlobalNetworkPolicy:
		if c.take(it, o) {
			p, ignored, err := ConvertGlobalNetworkPolicy(o)
			policy(p, o.Spec.Tier, ignored, err)
		}
	case *CalicoNetworkPolicy:
		if o = namespaced(o); c.take(it, o) {
			p, ignored, err := ConvertCalicoNetworkPolicy(o)
			policy(p, o.Spec.Tier, ignored, err)
		}
	case *GlobalNetworkSet:
		if c.take(it, o) {
			netset(ConvertGlobalNetworkSet(o))
		}
	case *CalicoNetworkSet:
		if o = namespaced(o); c.take(it, o) {
			netset(ConvertCalicoNetworkSet(o))
		}
	case *HostEndpoint:
		if !c.take(it, o) {
			return true
		}
		ep, ignored, err := ConvertHostEndpoint(o)
		if err != nil {
			c.fail(it, err)
			return true
		}
		partly(ignored)
		c.calico.hosts.put(ep)
	default:
		return false
	}
	return true
}

// checkCalicoTiers withdraws the Calico policies whose tier no manifest defines (Calico's
// admission refuses them; the agent's graph holds such a policy until its tier exists), each
// reported.
func (c *objectSet) checkCalicoTiers() {
	known := map[string]bool{}
	for _, t := range model.DefaultTiers() {
		known[t.Name] = true
	}
	for name := range c.calico.tiers {
		known[name] = true
	}
	for _, k := range sortedKeys(c.calico.tierName, func(a, b model.PolicyKey) bool { return a.String() < b.String() }) {
		if p := c.policies[k]; !known[p.Tier] {
			tier := c.calico.tierName[k]
			if tier == "" {
				tier = calicoTierDefault
			}
			c.errs = append(c.errs, fmt.Errorf("%s: tier %q does not exist; not enforced", calicoPolicyName(k), tier))
			delete(c.policies, k)
		}
	}
}

// checkHostEndpoints makes the host endpoints endpoints, one per node's interface: of several
// claiming one, the first by name; each other is reported and left out. One pass over the
// endpoints, each slot's holder found among its own claimants.
func (c *objectSet) checkHostEndpoints() {
	for _, name := range sortedKeys(c.calico.hosts.all, func(a, b string) bool { return a < b }) {
		ep := c.calico.hosts.all[name]
		if h := c.calico.hosts.holder(slotOf(&ep)); h != name {
			c.errs = append(c.errs, fmt.Errorf("HostEndpoint %s: node %s interface %s is HostEndpoint %s's; not enforced", name, ep.Node, ep.Host.Interface, h))
			continue
		}
		c.endpoints[ep.Key] = ep
	}
}

// calicoUpdates are the tiers (by name) and network sets (by key) of the manifests; namespaces
// that network sets are in are added to namespaces as for other namespaced objects.
func (c *objectSet) calicoUpdates(namespaces map[string]model.Namespace) (tiers, netsets []model.Update) {
	for _, name := range sortedKeys(c.calico.tiers, func(a, b string) bool { return a < b }) {
		tiers = append(tiers, model.TierSet{Tier: c.calico.tiers[name]})
	}
	for _, k := range sortedKeys(c.calico.netsets, func(a, b model.NetworkSetKey) bool { return a.String() < b.String() }) {
		implicitNamespace(namespaces, k.Namespace)
		netsets = append(netsets, model.NetworkSetSet{NetworkSet: c.calico.netsets[k]})
	}
	return tiers, netsets
}

// calicoPolicyName names a Calico policy as its manifest does.
func calicoPolicyName(k model.PolicyKey) string {
	if k.Kind == KindCalicoNetworkPolicy {
		return "NetworkPolicy.projectcalico.org " + k.Namespace + "/" + k.Name
	}
	return k.Kind + " " + k.Name
}

// calicoObjectName names a Calico object as objectName does others ("" for another kind): a
// Calico NetworkPolicy and NetworkSet with their group, so they are never taken for
// Kubernetes' NetworkPolicy of the same name.
func calicoObjectName(obj runtime.Object) string {
	switch o := obj.(type) {
	case *CalicoTier:
		return calicoKindTier + " " + o.Name
	case *GlobalNetworkPolicy:
		return calicoKindGlobalNetworkPolicy + " " + o.Name
	case *CalicoNetworkPolicy:
		return "NetworkPolicy.projectcalico.org " + o.Namespace + "/" + o.Name
	case *GlobalNetworkSet:
		return calicoKindGlobalNetworkSet + " " + o.Name
	case *HostEndpoint:
		return calicoKindHostEndpoint + " " + o.Name
	case *CalicoNetworkSet:
		return "NetworkSet.projectcalico.org " + o.Namespace + "/" + o.Name
	}
	return ""
}
