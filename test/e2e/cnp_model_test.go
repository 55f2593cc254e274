package e2e

// The world of sigs.k8s.io/network-policy-api's conformance suite (v0.3.0, conformance/base,
// Apache-2.0), read from the module's own embedded manifests (conformance.Manifests), so the
// objects are upstream's byte for byte: namespaces network-policy-conformance-{gryffindor,
// slytherin, hufflepuff, ravenclaw, forbidden-forrest} labelled conformance-house=<house>; per
// house a 2-replica StatefulSet (harry-potter, draco-malfoy, cedric-diggory, luna-lovegood)
// whose pods <set>-0 and <set>-1 carry the template's labels and container ports (web TCP/80,
// dns UDP/53) and serve TCP 80 and 8080, UDP 53 and 5353, SCTP 9003 and 9005; and the
// hostNetwork StatefulSet centaur in forbidden-forrest, serving on the node's addresses the
// host network ports (TCP 0 and 1, UDP 2 and 4, SCTP 6 and 7 of HostNetworkPorts).
//
// No controller runs here: the harness makes each StatefulSet's pods itself, as the StatefulSet
// controller names and labels them (the template's labels, statefulset.kubernetes.io/pod-name
// and apps.kubernetes.io/pod-index; not controller-revision-hash, whose value is the controller's
// hash of the template and which no test selects), pods alternating between the nodes;
// centaur-0 runs on node a and centaur-1 on node b, with the node's addresses as their status.

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/template"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	policyv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"
	"sigs.k8s.io/network-policy-api/conformance"
	"sigs.k8s.io/yaml"
)

// conformanceNamespacePrefix starts every namespace of the suite; the case table writes pods as
// "<house>/<pod>" without it.
const conformanceNamespacePrefix = "network-policy-conformance-"

// hostNetworkPorts are the suite's default host network ports (suite.HostNetworkPortRangeStart
// 34345 and the 8 ports after it): TCP 0 and 1, UDP 2 and 4 (3 and 5 are their netexec HTTP
// ports, unused), SCTP 6 and 7.
var hostNetworkPorts = []int{34345, 34346, 34347, 34348, 34349, 34350, 34351, 34352}

// conformanceServes are what every house pod serves, after its containers: TCP 80 and 8080,
// UDP 53 and 5353 (SCTP 9003 and 9005 are probed with raw INITs, which need no server).
var conformanceServes = []served{{protocolTCP, 80}, {protocolTCP, 8080}, {protocolUDP, 53}, {protocolUDP, 5353}}

// centaurServes are what a centaur serves on its node's addresses.
func centaurServes() []served {
	return []served{{protocolTCP, int32(hostNetworkPorts[0])}, {protocolTCP, int32(hostNetworkPorts[1])},
		{protocolUDP, int32(hostNetworkPorts[2])}, {protocolUDP, int32(hostNetworkPorts[4])}}
}

// conformanceKey turns the table's "<house>/<pod>" into the pod key "ns/name".
func conformanceKey(short string) string { return conformanceNamespacePrefix + short }

// manifestObjects reads one manifest of conformance.Manifests, its templates filled with
// hostNetworkPorts as the suite fills them, and returns its documents, each decoded strictly
// into the type of its kind: Namespace, StatefulSet, NetworkPolicy or ClusterNetworkPolicy.
func manifestObjects(path string) ([]any, error) {
	raw, err := fs.ReadFile(conformance.Manifests, path)
	if err != nil {
		return nil, err
	}
	tmpl, err := template.New(path).Parse(string(raw))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var filled bytes.Buffer
	if err := tmpl.Execute(&filled, struct{ HostNetworkPorts []int }{hostNetworkPorts}); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []any
	r := utilyaml.NewYAMLReader(bufio.NewReader(&filled))
	for n := 1; ; n++ {
		doc, err := r.Read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s document %d: %w", path, n, err)
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return nil, fmt.Errorf("%s document %d: %w", path, n, err)
		}
		var obj any
		switch tm.Kind {
		case "":
			continue // only comments
		case "Namespace":
			obj = &corev1.Namespace{}
		case "StatefulSet":
			obj = &appsv1.StatefulSet{}
		case "NetworkPolicy":
			obj = &networkingv1.NetworkPolicy{}
		case "ClusterNetworkPolicy":
			obj = &policyv1beta1.ClusterNetworkPolicy{}
		default:
			return nil, fmt.Errorf("%s document %d: unexpected kind %q", path, n, tm.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			return nil, fmt.Errorf("%s document %d (%s): %w", path, n, tm.Kind, err)
		}
		out = append(out, obj)
	}
}

// hostPod is a hostNetwork pod of the suite: it has its node's addresses and serves there.
type hostPod struct {
	key, node string
	labels    map[string]string
	ports     []corev1.ContainerPort
}

// conformanceWorld builds the suite's world from base/manifests.yaml: the namespaces and the
// pods of the house StatefulSets, which all declare the same container ports, and the
// hostNetwork pods apart.
func conformanceWorld() (*world, []hostPod, error) {
	objs, err := manifestObjects("base/manifests.yaml")
	if err != nil {
		return nil, nil, err
	}
	w := &world{serves: conformanceServes}
	nsLabels := map[string]map[string]string{}
	podLabels := map[string]map[string]string{}
	var hosts []hostPod
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.Namespace:
			w.namespaces = append(w.namespaces, o.Name)
			nsLabels[o.Name] = o.Labels
		case *appsv1.StatefulSet:
			var ports []corev1.ContainerPort
			for _, c := range o.Spec.Template.Spec.Containers {
				ports = append(ports, c.Ports...)
			}
			for i := range *o.Spec.Replicas {
				name := fmt.Sprintf("%s-%d", o.Name, i)
				key := o.Namespace + "/" + name
				labels := maps.Clone(o.Spec.Template.Labels)
				labels[appsv1.StatefulSetPodNameLabel] = name
				labels[appsv1.PodIndexLabel] = strconv.Itoa(int(i))
				if o.Spec.Template.Spec.HostNetwork {
					hosts = append(hosts, hostPod{key: key, node: nodeNames()[int(i)%len(nodeNames())],
						labels: labels, ports: ports})
					continue
				}
				if w.ports == nil {
					w.ports = ports
				} else if !slices.Equal(w.ports, ports) {
					return nil, nil, fmt.Errorf("StatefulSet %s/%s declares ports %v, the others %v", o.Namespace, o.Name, ports, w.ports)
				}
				w.pods = append(w.pods, key)
				podLabels[key] = labels
			}
		}
	}
	w.nsLabels = func(ns string) map[string]string { return nsLabels[ns] }
	w.podLabels = func(key string) map[string]string { return podLabels[key] }
	if !strings.HasPrefix(w.namespaces[0], conformanceNamespacePrefix) || len(w.pods) != 8 || len(hosts) != 2 {
		return nil, nil, fmt.Errorf("base/manifests.yaml: namespaces %v, pods %v, hostNetwork pods %d: not the suite's world", w.namespaces, w.pods, len(hosts))
	}
	return w, hosts, nil
}
