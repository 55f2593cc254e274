package scale

import (
	"fmt"
	"io"
)

// ManyPoliciesNamespace is the namespace of ManyPolicies' pods and policies.
const ManyPoliciesNamespace = "many"

// ManyPolicies describes the manifests of n NetworkPolicies that all select one server pod on
// Node, policy i allowing TCP port 80 from the pods labelled peer=p<i>: PeersPerPolicy remote pods
// each, on node "node-remote".
type ManyPolicies struct {
	Policies       int
	PeersPerPolicy int
	Node           string
}

// ManyPoliciesBench is the P7 benchmark's shape: 10,000 policies of 5 peers each.
func ManyPoliciesBench() ManyPolicies {
	return ManyPolicies{Policies: 10000, PeersPerPolicy: 5, Node: "node-local"}
}

// PolicyName is the name of policy i.
func (m ManyPolicies) PolicyName(i int) string { return fmt.Sprintf("allow-%05d", i) }

// WritePods writes the namespace, the server pod and every peer pod as YAML documents.
func (m ManyPolicies) WritePods(w io.Writer) error {
	if _, err := fmt.Fprintf(w, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n  labels:\n    kubernetes.io/metadata.name: %s\n", ManyPoliciesNamespace, ManyPoliciesNamespace); err != nil {
		return err
	}
	if err := writePod(w, "server", m.Node, "role: server", "10.250.0.1", "fd00:250::1"); err != nil {
		return err
	}
	for i := range m.Policies {
		for j := range m.PeersPerPolicy {
			n := i*m.PeersPerPolicy + j + 1
			if err := writePod(w, fmt.Sprintf("peer-%05d-%d", i, j), "node-remote", fmt.Sprintf("peer: p%d", i),
				addr4(10<<24|100<<16+uint32(n)).String(), fmt.Sprintf("fd00:100::%x", n)); err != nil {
				return err
			}
		}
	}
	return nil
}

func writePod(w io.Writer, name, node, label, v4, v6 string) error {
	_, err := fmt.Fprintf(w, `---
apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: %s
  labels:
    %s
spec:
  nodeName: %s
  containers:
  - name: c
    image: registry.k8s.io/pause:3.9
status:
  phase: Running
  podIP: %s
  podIPs:
  - ip: %s
  - ip: %s
`, name, ManyPoliciesNamespace, label, node, v4, v4, v6)
	return err
}

// WritePolicy writes policy i as a YAML document.
func (m ManyPolicies) WritePolicy(w io.Writer, i int) error {
	_, err := fmt.Fprintf(w, `---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: %s
  namespace: %s
spec:
  podSelector:
    matchLabels:
      role: server
  policyTypes:
  - Ingress
  ingress:
  - from:
    - podSelector:
        matchLabels:
          peer: p%d
    ports:
    - protocol: TCP
      port: 80
`, m.PolicyName(i), ManyPoliciesNamespace, i)
	return err
}

// WritePolicies writes every policy.
func (m ManyPolicies) WritePolicies(w io.Writer) error {
	for i := range m.Policies {
		if err := m.WritePolicy(w, i); err != nil {
			return err
		}
	}
	return nil
}
