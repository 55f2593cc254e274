package graph

import "iter"

// This file is what selectors see of the label index's records: each record answers Get
// (selector.Labels) with its own labels and Calico's automatic labels, which are never stored.
// The agent holds every pod of the cluster; three more labels stored per pod would cost three
// strings each, where answering them costs a comparison of the key per lookup.
//
// Automatic labels (Calico's "Automatic labels"; Felix's conversion of pods, namespaces,
// service accounts and network sets): an automatic label replaces a stored label of its key.
//
//   - endpoint: projectcalico.org/namespace (its namespace), projectcalico.org/orchestrator
//     ("k8s"), projectcalico.org/serviceaccount (its service account, when it has one);
//   - namespace (for namespace selectors) and service account (for service-account selectors):
//     projectcalico.org/name, while its object exists, like its other labels;
//   - network set: projectcalico.org/namespace, for a namespaced one.
const (
	labelNamespace      = "projectcalico.org/namespace"
	labelOrchestrator   = "projectcalico.org/orchestrator"
	labelServiceAccount = "projectcalico.org/serviceaccount"
	labelName           = "projectcalico.org/name"
	orchestratorK8s     = "k8s"
)

// Get returns the value of label k of e, automatic labels included (selector.Labels).
func (e *endpoint) Get(k string) (string, bool) {
	if e.host {
		if isEndpointAutomatic(k) {
			return "", false // a host endpoint has no namespace, orchestrator or account
		}
		return e.labels.Get(k)
	}
	switch k {
	case labelNamespace:
		return e.ns.name, true
	case labelOrchestrator:
		return orchestratorK8s, true
	case labelServiceAccount:
		if e.sa == nil {
			return "", false
		}
		return e.sa.key.name, true
	}
	return e.labels.Get(k)
}

// allLabels yields e's labels as Get answers them: the automatic ones, then the stored ones
// that no automatic label replaces.
func (e *endpoint) allLabels() iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		if !e.host && (!yield(labelNamespace, e.ns.name) || !yield(labelOrchestrator, orchestratorK8s)) {
			return
		}
		if e.sa != nil && !yield(labelServiceAccount, e.sa.key.name) {
			return
		}
		for k, v := range e.labels.All() {
			if isEndpointAutomatic(k) {
				continue
			}
			if !yield(k, v) {
				return
			}
		}
	}
}

func isEndpointAutomatic(k string) bool {
	return k == labelNamespace || k == labelOrchestrator || k == labelServiceAccount
}

// Get returns the value of label k of the namespace, projectcalico.org/name included; a
// namespace whose object is unknown has no labels.
func (ns *namespace) Get(k string) (string, bool) {
	if !ns.exists {
		return "", false
	}
	if k == labelName {
		return ns.name, true
	}
	v, ok := ns.labels[k]
	return v, ok
}

// allLabels yields the namespace's labels as Get answers them.
func (ns *namespace) allLabels() iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		if !ns.exists || !yield(labelName, ns.name) {
			return
		}
		for k, v := range ns.labels {
			if k != labelName && !yield(k, v) {
				return
			}
		}
	}
}

// Get returns the value of label k of the service account, projectcalico.org/name included;
// a nil account (an endpoint without one) and one whose object is unknown have no labels.
func (a *account) Get(k string) (string, bool) {
	if a == nil || !a.exists {
		return "", false
	}
	if k == labelName {
		return a.key.name, true
	}
	v, ok := a.labels[k]
	return v, ok
}

// Get returns the value of label k of the network set, projectcalico.org/namespace included
// for a namespaced one.
func (n *netSet) Get(k string) (string, bool) {
	if k == labelNamespace {
		if n.ns == nil {
			return "", false
		}
		return n.ns.name, true
	}
	return n.labels.Get(k)
}

// isUniversal reports whether every endpoint carries label key k (an automatic label whose
// value tells nothing apart, or by namespace only): the label index files nothing under it.
func isUniversal(k string) bool { return k == labelNamespace || k == labelOrchestrator }
