package sync

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Calico's policy API, projectcalico.org/v3: the fields nftpolicy reads of Tier,
// GlobalNetworkPolicy, NetworkPolicy, GlobalNetworkSet, NetworkSet and HostEndpoint, under Calico's JSON
// names, and the fields it accepts without enforcing (http, services, performanceHints,
// allowedEgressDomains, rule metadata), so that a strict
// decode of a user's Calico manifest succeeds and the converter can say what it leaves out.
// Calico's own Go module is not a dependency: these types are the contract with
// deploy/crds/calico, whose schemas hold the same fields.

// CalicoGroupVersion is the API group and version of Calico's policy API.
var CalicoGroupVersion = schema.GroupVersion{Group: "projectcalico.org", Version: "v3"}

// The Calico kinds as their manifests name them.
const (
	calicoKindTier                = "Tier"
	calicoKindGlobalNetworkPolicy = "GlobalNetworkPolicy"
	calicoKindNetworkPolicy       = "NetworkPolicy"
	calicoKindGlobalNetworkSet    = "GlobalNetworkSet"
	calicoKindNetworkSet          = "NetworkSet"
	calicoKindHostEndpoint        = "HostEndpoint"
)

// addCalicoTypes registers the Calico kinds and their lists in s, with metav1's options.
func addCalicoTypes(s *runtime.Scheme) {
	gv := CalicoGroupVersion
	for kind, obj := range map[string]runtime.Object{
		calicoKindTier: &CalicoTier{}, calicoKindTier + "List": &CalicoTierList{},
		calicoKindGlobalNetworkPolicy: &GlobalNetworkPolicy{}, calicoKindGlobalNetworkPolicy + "List": &GlobalNetworkPolicyList{},
		calicoKindNetworkPolicy: &CalicoNetworkPolicy{}, calicoKindNetworkPolicy + "List": &CalicoNetworkPolicyList{},
		calicoKindGlobalNetworkSet: &GlobalNetworkSet{}, calicoKindGlobalNetworkSet + "List": &GlobalNetworkSetList{},
		calicoKindNetworkSet: &CalicoNetworkSet{}, calicoKindNetworkSet + "List": &CalicoNetworkSetList{},
		calicoKindHostEndpoint: &HostEndpoint{}, calicoKindHostEndpoint + "List": &HostEndpointList{},
	} {
		s.AddKnownTypeWithName(gv.WithKind(kind), obj)
	}
	metav1.AddToGroupVersion(s, gv)
}

// CalicoTier is a projectcalico.org/v3 Tier.
type CalicoTier struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              CalicoTierSpec `json:"spec"`
	// Status is written by Calico's controllers; read as nothing.
	Status json.RawMessage `json:"status,omitempty"`
}

// CalicoTierSpec orders a tier and names what happens to traffic none of its policies decides.
type CalicoTierSpec struct {
	Order         *float64 `json:"order,omitempty"`
	DefaultAction *string  `json:"defaultAction,omitempty"`
}

// GlobalNetworkPolicy is a projectcalico.org/v3 GlobalNetworkPolicy: cluster-wide.
type GlobalNetworkPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              CalicoPolicySpec `json:"spec"`
}

// CalicoNetworkPolicy is a projectcalico.org/v3 NetworkPolicy: namespaced. Its spec has no
// namespaceSelector, doNotTrack, preDNAT or applyOnForward (the CRD refuses them; the
// converter reports them).
type CalicoNetworkPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              CalicoPolicySpec `json:"spec"`
}

// CalicoPolicySpec is the spec of both policy kinds.
type CalicoPolicySpec struct {
	Tier                   string       `json:"tier,omitempty"`
	Order                  *float64     `json:"order,omitempty"`
	Selector               string       `json:"selector,omitempty"`
	NamespaceSelector      string       `json:"namespaceSelector,omitempty"`
	ServiceAccountSelector string       `json:"serviceAccountSelector,omitempty"`
	Types                  []string     `json:"types,omitempty"`
	Ingress                []CalicoRule `json:"ingress,omitempty"`
	Egress                 []CalicoRule `json:"egress,omitempty"`
	DoNotTrack             bool         `json:"doNotTrack,omitempty"`
	PreDNAT                bool         `json:"preDNAT,omitempty"`
	ApplyOnForward         bool         `json:"applyOnForward,omitempty"`
	PerformanceHints       []string     `json:"performanceHints,omitempty"`
}

// CalicoRule is one rule of a Calico policy.
type CalicoRule struct {
	Action      string              `json:"action"`
	IPVersion   *int                `json:"ipVersion,omitempty"`
	Protocol    *NumOrString        `json:"protocol,omitempty"`
	NotProtocol *NumOrString        `json:"notProtocol,omitempty"`
	ICMP        *CalicoICMP         `json:"icmp,omitempty"`
	NotICMP     *CalicoICMP         `json:"notICMP,omitempty"`
	Source      CalicoEntityRule    `json:"source,omitzero"`
	Destination CalicoEntityRule    `json:"destination,omitzero"`
	HTTP        *CalicoHTTPMatch    `json:"http,omitempty"`
	Metadata    *CalicoRuleMetadata `json:"metadata,omitempty"`
}

// CalicoICMP matches an ICMP type and code.
type CalicoICMP struct {
	Type *int `json:"type,omitempty"`
	Code *int `json:"code,omitempty"`
}

// CalicoEntityRule is a rule's source or destination.
type CalicoEntityRule struct {
	Nets              []string                `json:"nets,omitempty"`
	NotNets           []string                `json:"notNets,omitempty"`
	Selector          string                  `json:"selector,omitempty"`
	NotSelector       string                  `json:"notSelector,omitempty"`
	NamespaceSelector string                  `json:"namespaceSelector,omitempty"`
	Ports             []NumOrString           `json:"ports,omitempty"`
	NotPorts          []NumOrString           `json:"notPorts,omitempty"`
	ServiceAccounts   *CalicoServiceAccounts  `json:"serviceAccounts,omitempty"`
	Services          *CalicoServiceReference `json:"services,omitempty"`
}

// CalicoServiceAccounts matches the service account of a peer by name and by labels.
type CalicoServiceAccounts struct {
	Names    []string `json:"names,omitempty"`
	Selector string   `json:"selector,omitempty"`
}

// CalicoServiceReference names a Kubernetes Service (read, not enforced).
type CalicoServiceReference struct {
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
}

// CalicoHTTPMatch is a rule's HTTP match (read, not enforced: it needs an L7 proxy).
type CalicoHTTPMatch struct {
	Methods []string `json:"methods,omitempty"`
	Paths   []struct {
		Exact  string `json:"exact,omitempty"`
		Prefix string `json:"prefix,omitempty"`
	} `json:"paths,omitempty"`
}

// CalicoRuleMetadata is a rule's metadata (annotations only; not read).
type CalicoRuleMetadata struct {
	Annotations map[string]string `json:"annotations,omitempty"`
}

// GlobalNetworkSet is a projectcalico.org/v3 GlobalNetworkSet: cluster-wide labelled networks.
type GlobalNetworkSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              CalicoNetworkSetSpec `json:"spec"`
}

// CalicoNetworkSet is a projectcalico.org/v3 NetworkSet: namespaced labelled networks.
type CalicoNetworkSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              CalicoNetworkSetSpec `json:"spec"`
}

// CalicoNetworkSetSpec lists a network set's networks. allowedEgressDomains is read and not
// enforced.
type CalicoNetworkSetSpec struct {
	Nets                 []string `json:"nets,omitempty"`
	AllowedEgressDomains []string `json:"allowedEgressDomains,omitempty"`
}

// HostEndpoint is a projectcalico.org/v3 HostEndpoint: one of a node's interfaces (or all of
// them), which policies select by its labels like a pod.
type HostEndpoint struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              HostEndpointSpec `json:"spec"`
}

// HostEndpointSpec names the node and interface ("*": all of the node's interfaces), the
// addresses rule selectors match the endpoint by, its profiles and its named ports.
type HostEndpointSpec struct {
	Node          string             `json:"node,omitempty"`
	InterfaceName string             `json:"interfaceName,omitempty"`
	ExpectedIPs   []string           `json:"expectedIPs,omitempty"`
	Profiles      []string           `json:"profiles,omitempty"`
	Ports         []HostEndpointPort `json:"ports,omitempty"`
}

// HostEndpointPort is a named port of a host endpoint.
type HostEndpointPort struct {
	Name     string      `json:"name"`
	Protocol NumOrString `json:"protocol"`
	Port     int         `json:"port"`
}

// NumOrString is a JSON number or string, as written (Calico's numorstring: a protocol by
// number or name, a port by number, "first:last" range or name).
type NumOrString struct {
	Str   string
	Num   int64
	IsNum bool
}

// String is the value as written, a number in decimal.
func (v NumOrString) String() string {
	if v.IsNum {
		return strconv.FormatInt(v.Num, 10)
	}
	return v.Str
}

func (v NumOrString) MarshalJSON() ([]byte, error) {
	if v.IsNum {
		return []byte(strconv.FormatInt(v.Num, 10)), nil
	}
	return json.Marshal(v.Str)
}

func (v *NumOrString) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		*v = NumOrString{}
		return json.Unmarshal(b, &v.Str)
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("want an integer or a string, got %s", b)
	}
	*v = NumOrString{Num: n, IsNum: true}
	return nil
}

// The lists the watches read.
type (
	CalicoTierList struct {
		metav1.TypeMeta `json:",inline"`
		metav1.ListMeta `json:"metadata,omitempty"`
		Items           []CalicoTier `json:"items"`
	}
	GlobalNetworkPolicyList struct {
		metav1.TypeMeta `json:",inline"`
		metav1.ListMeta `json:"metadata,omitempty"`
		Items           []GlobalNetworkPolicy `json:"items"`
	}
	CalicoNetworkPolicyList struct {
		metav1.TypeMeta `json:",inline"`
		metav1.ListMeta `json:"metadata,omitempty"`
		Items           []CalicoNetworkPolicy `json:"items"`
	}
	GlobalNetworkSetList struct {
		metav1.TypeMeta `json:",inline"`
		metav1.ListMeta `json:"metadata,omitempty"`
		Items           []GlobalNetworkSet `json:"items"`
	}
	CalicoNetworkSetList struct {
		metav1.TypeMeta `json:",inline"`
		metav1.ListMeta `json:"metadata,omitempty"`
		Items           []CalicoNetworkSet `json:"items"`
	}
	HostEndpointList struct {
		metav1.TypeMeta `json:",inline"`
		metav1.ListMeta `json:"metadata,omitempty"`
		Items           []HostEndpoint `json:"items"`
	}
)

// deepCopyJSON copies an object through its JSON form: the Calico types are small and copied
// rarely (LoadDir's default namespace), which hand-written copies would not repay. Their JSON
// encoding cannot fail (no channels, functions or non-finite floats come from a decode).
func deepCopyJSON[T any](in *T) *T {
	out := new(T)
	data, err := json.Marshal(in)
	if err == nil {
		err = json.Unmarshal(data, out)
	}
	if err != nil {
		panic(fmt.Sprintf("sync: copying a %T: %v", in, err))
	}
	return out
}

func (o *CalicoTier) DeepCopyObject() runtime.Object              { return deepCopyJSON(o) }
func (o *GlobalNetworkPolicy) DeepCopyObject() runtime.Object     { return deepCopyJSON(o) }
func (o *CalicoNetworkPolicy) DeepCopyObject() runtime.Object     { return deepCopyJSON(o) }
func (o *GlobalNetworkSet) DeepCopyObject() runtime.Object        { return deepCopyJSON(o) }
func (o *CalicoNetworkSet) DeepCopyObject() runtime.Object        { return deepCopyJSON(o) }
func (o *CalicoTierList) DeepCopyObject() runtime.Object          { return deepCopyJSON(o) }
func (o *GlobalNetworkPolicyList) DeepCopyObject() runtime.Object { return deepCopyJSON(o) }
func (o *CalicoNetworkPolicyList) DeepCopyObject() runtime.Object { return deepCopyJSON(o) }
func (o *GlobalNetworkSetList) DeepCopyObject() runtime.Object    { return deepCopyJSON(o) }
func (o *CalicoNetworkSetList) DeepCopyObject() runtime.Object    { return deepCopyJSON(o) }
func (o *HostEndpoint) DeepCopyObject() runtime.Object            { return deepCopyJSON(o) }
func (o *HostEndpointList) DeepCopyObject() runtime.Object        { return deepCopyJSON(o) }
