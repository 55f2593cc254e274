package graph

import (
	"iter"
	"maps"
	"net/netip"
	"slices"

	"github.com/nftpolicy/nftpolicy/internal/model"
)

func (g *Graph) setEndpoint(in model.Endpoint) {
	m := keepEndpoint(in)
	local := m.Node == g.cfg.NodeName
	e := g.endpoint(m.Key)
	if e != nil && e.local != local {
		// Moving between local and remote is rare: handle it as delete + add.
		g.deleteEndpoint(m.Key)
		e = nil
	}
	g.scratch = appendNet(g.scratch[:0], m.Addrs, m.NamedPorts)
	if e == nil {
		e = &endpoint{name: m.Key.Name, labels: m.Labels, net: netInfo(g.scratch), local: local}
		e.ns = g.namespaceOf(m.Key.Namespace)
		e.ns.endpoints[e.name] = e
		if m.ServiceAccount != "" {
			e.sa = g.accountOf(accountKey{m.Key.Namespace, m.ServiceAccount})
			e.sa.endpoints++
		}
		if local {
			g.local[m.Key] = e
			g.dirtyEndpoints[m.Key] = struct{}{}
			g.claimAddrs(e, m.Claim())
		}
		g.fileEndpoint(e, true)
		g.reevaluate(e)
		return
	}
	netChanged := string(g.scratch) != string(e.net)
	c := m.Claim()
	reclaim := local && (netChanged || !c.Equal(g.owners.claims[e]))
	if local {
		g.dirtyEndpoints[m.Key] = struct{}{}
	}
	if reclaim {
		g.releaseAddrs(e)
	}
	// Addresses and named ports: withdraw the old contributions to sets, add the new ones.
	if netChanged {
		for _, mt := range e.matches.all() {
			for _, s := range mt.sets {
				g.contribute(s, e, false)
			}
		}
		if e.inSets > 0 {
			g.holders.remove(e)
		}
		e.net = netInfo(g.scratch)
		if e.inSets > 0 {
			g.holders.add(e)
		}
		for _, mt := range e.matches.all() {
			for _, s := range mt.sets {
				g.contribute(s, e, true)
			}
		}
	}
	if reclaim {
		g.claimAddrs(e, c)
	}
	relabel := e.labels != m.Labels
	if m.ServiceAccount != e.account() {
		if e.sa != nil {
			e.sa.endpoints--
			g.gcAccount(e.sa)
			e.sa = nil
		}
		if m.ServiceAccount != "" {
			e.sa = g.accountOf(accountKey{m.Key.Namespace, m.ServiceAccount})
			e.sa.endpoints++
		}
		relabel = true
	}
	if relabel {
		g.fileEndpoint(e, false)
		e.labels = m.Labels
		g.fileEndpoint(e, true)
	}
	if relabel {
		g.reevaluate(e)
	}
}

// key is e's namespace and name.
func (e *endpoint) key() model.EndpointKey {
	return model.EndpointKey{Namespace: e.ns.name, Name: e.name}
}

// endpoint returns the endpoint of k, nil if there is none.
func (g *Graph) endpoint(k model.EndpointKey) *endpoint {
	if ns := g.namespaces[k.Namespace]; ns != nil {
		return ns.endpoints[k.Name]
	}
	return nil
}

// allEndpoints yields every endpoint, namespace by namespace.
func (g *Graph) allEndpoints() iter.Seq[*endpoint] { return endpointsOf(maps.Values(g.namespaces)) }

// namespaceEndpoints yields the endpoints of namespace name.
func (g *Graph) namespaceEndpoints(name string) iter.Seq[*endpoint] {
	if ns := g.namespaces[name]; ns != nil {
		return maps.Values(ns.endpoints)
	}
	return func(func(*endpoint) bool) {}
}

// endpointsOf yields the endpoints of the namespaces nss.
func endpointsOf(nss iter.Seq[*namespace]) iter.Seq[*endpoint] {
	return func(yield func(*endpoint) bool) {
		for ns := range nss {
			for _, e := range ns.endpoints {
				if !yield(e) {
					return
				}
			}
		}
	}
}

// account is the name of e's service account ("" for none).
func (e *endpoint) account() string {
	if e.sa == nil {
		return ""
	}
	return e.sa.key.name
}

func (g *Graph) deleteEndpoint(k model.EndpointKey) {
	e := g.endpoint(k)
	if e == nil {
		return
	}
	ms := slices.Clone(e.matches.all())
	for _, m := range ms {
		g.setMember(m, e, false)
	}
	g.fileEndpoint(e, false)
	delete(e.ns.endpoints, e.name)
	g.gcNamespace(e.ns)
	if e.sa != nil {
		e.sa.endpoints--
		g.gcAccount(e.sa)
	}
	if e.local {
		delete(g.local, k)
		g.releaseAddrs(e)
		g.dirtyEndpoints[k] = struct{}{}
	}
}

// keepEndpoint is the endpoint as the graph keeps it: the update's labels, addresses and named
// ports are kept as they are (updates are handed over, see model.Update); addresses are copied
// only when they need normalising (invalid ones dropped, IPv4-mapped ones unmapped, zones
// dropped: set members are plain addresses).
func keepEndpoint(in model.Endpoint) model.Endpoint {
	m := in
	if slices.ContainsFunc(in.Addrs, func(a netip.Addr) bool { return !a.IsValid() || a.Is4In6() || a.Zone() != "" }) {
		m.Addrs = make([]netip.Addr, 0, len(in.Addrs))
		for _, a := range in.Addrs {
			if a.IsValid() {
				m.Addrs = append(m.Addrs, a.Unmap().WithZone(""))
			}
		}
	}
	return m
}
