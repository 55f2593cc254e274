package sync

import (
	"bufio"
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
)

// TestDecodePodList: a PodList as the API server encodes it (protobuf, in its envelope) decodes
// into the records the transform makes of the typed decode, in order, with the list's metadata.
func TestDecodePodList(t *testing.T) {
	want := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "4711", Continue: "next"}}
	for i := range 50 {
		p := corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprint("ns", i%3), Name: fmt.Sprint("p", i), ResourceVersion: fmt.Sprint(100 + i),
				Annotations: map[string]string{"big": "dropped"}},
			Spec: corev1.PodSpec{NodeName: "n1", ServiceAccountName: "sa", HostNetwork: i%7 == 0},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: fmt.Sprintf("10.0.0.%d", i+1),
				PodIPs: []corev1.PodIP{{IP: fmt.Sprintf("10.0.0.%d", i+1)}, {IP: fmt.Sprintf("fd00::%x", i+1)}}},
		}
		// items differ from the one before in what they hold (the decoder reuses one Pod value):
		// labels or none, one to three containers with more or fewer ports, one IP or two
		if i%5 != 0 {
			p.Labels = map[string]string{"app": fmt.Sprint("a", i%4)}
		}
		for c := range i%3 + 1 {
			ct := corev1.Container{Name: fmt.Sprint("c", c), Image: "img", Env: []corev1.EnvVar{{Name: "X", Value: "y"}}}
			for k := range (i + c) % 3 {
				ct.Ports = append(ct.Ports, corev1.ContainerPort{Name: fmt.Sprintf("p%d-%d", c, k), ContainerPort: int32(8080 + k), Protocol: corev1.ProtocolTCP})
			}
			p.Spec.Containers = append(p.Spec.Containers, ct)
		}
		if i%4 == 1 {
			p.Status.PodIPs = p.Status.PodIPs[:1]
		}
		// what the decoder reads only for some pods, and what it skips
		always, never := corev1.ContainerRestartPolicyAlways, corev1.ContainerRestartPolicy("Never")
		switch i % 11 {
		case 1: // a sidecar serves named ports; another init container does not
			p.Spec.InitContainers = []corev1.Container{
				{Name: "side", RestartPolicy: &always, Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9090, Protocol: corev1.ProtocolUDP}}},
				{Name: "init", RestartPolicy: &never, Ports: []corev1.ContainerPort{{Name: "setup", ContainerPort: 9, Protocol: corev1.ProtocolTCP}}}}
		case 2:
			p.Status.Phase = corev1.PodSucceeded
		case 3:
			p.Spec.NodeName = ""
		case 4: // the old single address only
			p.Status.PodIPs = nil
		case 5:
			p.Status.PodIPs[0].IP = "not-an-ip"
		case 6:
			p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{Name: "bad", ContainerPort: 70000, Protocol: "QUIC"})
		case 7:
			p.Labels = map[string]string{"a": "1", "b": "", "app.kubernetes.io/name": "x"}
			p.Spec.ServiceAccountName = ""
		case 8: // an address before the containers run
			p.Status.Phase = corev1.PodPending
		case 9: // no namespace and no version, which the API server never sends: the record's id
			// is the name alone, and must not be a view of the list's buffer
			p.Namespace, p.ResourceVersion = "", ""
		}
		p.UID = "0000-1111"
		p.CreationTimestamp = metav1.Unix(1700000000+int64(i%4)*3600, 0) // pods differ in age
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "u"}}
		p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate,
			FieldsV1: metav1.NewFieldsV1(`{"f:status":{}}`)}}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c0", Ready: true, Image: "img", ImageID: "sha"}}
		p.Status.HostIP = "192.168.0.1"
		want.Items = append(want.Items, p)
	}
	var buf bytes.Buffer
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(want, &buf); err != nil {
		t.Fatal(err)
	}
	raw := buf.Bytes()
	w := New(Config{})
	if !bytes.HasPrefix(raw, protobufMagic) {
		t.Fatalf("encoded list starts with %q", raw[:4])
	}
	got, err := decodePodList(bufio.NewReader(bytes.NewReader(raw[len(protobufMagic):])), w.recordPod)
	if err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != "4711" || got.Continue != "next" {
		t.Errorf("list metadata %+v", got.ListMeta)
	}
	if len(got.Items) != len(want.Items) {
		t.Fatalf("%d pods decoded, want %d", len(got.Items), len(want.Items))
	}
	for i := range want.Items {
		g, _ := CachedPod(got.Items[i])
		r, _ := CachedPod(w.recordPod(&want.Items[i]))
		if gr, wr := got.Items[i].(*podRecord), w.recordPod(&want.Items[i]); gr.recordMeta != wr.recordMeta || fmt.Sprint(gr.err()) != fmt.Sprint(wr.err()) ||
			gr.isEndpoint() != wr.isEndpoint() || gr.fingerprint != wr.fingerprint {
			t.Errorf("pod %d: record %+v, want %+v", i, gr, wr)
		}
		if !reflect.DeepEqual(g, r) {
			t.Fatalf("pod %d:\n got %+v\nwant %+v", i, g, r)
		}
	}
	for _, cut := range []int{3, len(raw) / 2, len(raw) - len(protobufMagic) - 1} {
		if _, err := decodePodList(bufio.NewReader(bytes.NewReader(raw[len(protobufMagic):len(raw)-cut])), w.recordPod); err == nil {
			t.Errorf("a list truncated by %d bytes decoded without error", cut)
		}
	}
}

// TestDecodePodFieldsCreationTimestamp: the creation time decodes as metav1.Time decodes it from
// the generated decoder, for every encoding that decoder accepts: an empty message is the zero
// time, a message without seconds (nanos or unknown fields only) the epoch, and a second
// occurrence replaces the first rather than merging into it.
func TestDecodePodFieldsCreationTimestamp(t *testing.T) {
	seconds := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 1700000000)
	nanos := protowire.AppendVarint(protowire.AppendTag(nil, 2, protowire.VarintType), 5)
	unknown := protowire.AppendVarint(protowire.AppendTag(nil, 9, protowire.VarintType), 1)
	for _, c := range []struct {
		name  string
		times [][]byte // the creationTimestamp occurrences, in order
	}{
		{"absent", nil},
		{"empty", [][]byte{{}}},
		{"seconds", [][]byte{seconds}},
		{"seconds and nanos", [][]byte{append(slices.Clone(seconds), nanos...)}},
		{"nanos only", [][]byte{nanos}},
		{"an unknown field only", [][]byte{unknown}},
		{"seconds, then empty", [][]byte{seconds, {}}},
		{"seconds, then nanos", [][]byte{seconds, nanos}},
		{"nanos, then seconds", [][]byte{nanos, seconds}},
	} {
		var meta []byte
		for _, ts := range c.times {
			meta = protowire.AppendBytes(protowire.AppendTag(meta, 8, protowire.BytesType), ts)
		}
		pod := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), meta)
		var want, got corev1.Pod
		if err := want.Unmarshal(pod); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if err := decodePodFields(pod, &got); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !got.CreationTimestamp.Equal(&want.CreationTimestamp) {
			t.Errorf("%s: creationTimestamp %v, want %v", c.name, got.CreationTimestamp, want.CreationTimestamp)
		}
	}
}

// TestDecodePodListFallsBack: a pod that decodePodFields rejects and the generated decoder
// reads — here hostNetwork as a varint of more than 64 bits, which protowire refuses and the
// generated code truncates — is decoded by the generated decoder, as a watch event's pod: the
// list goes on, with the record a watch event would make.
func TestDecodePodListFallsBack(t *testing.T) {
	pod := func(name string) []byte {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: "1"},
			Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1"}}
		b, err := p.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	spec := protowire.AppendTag(nil, 11, protowire.VarintType)
	spec = append(spec, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02)
	odd := protowire.AppendBytes(protowire.AppendTag(pod("odd"), 2, protowire.BytesType), spec)
	if decodePodFields(odd, &corev1.Pod{}) == nil {
		t.Fatal("decodePodFields reads a varint of more than 64 bits")
	}
	var want corev1.Pod
	if err := want.Unmarshal(odd); err != nil {
		t.Fatal(err)
	}
	var list []byte
	for _, item := range [][]byte{pod("a"), odd, pod("b")} {
		list = protowire.AppendBytes(protowire.AppendTag(list, 2, protowire.BytesType), item)
	}
	raw, err := (&runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: "v1", Kind: "PodList"}, Raw: list}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	w := New(Config{})
	got, err := decodePodList(bufio.NewReader(bytes.NewReader(raw)), w.recordPod)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Items) != 3 {
		t.Fatalf("%d pods decoded, want 3", len(got.Items))
	}
	g, _ := CachedPod(got.Items[1])
	r, _ := CachedPod(w.recordPod(&want))
	if !r.IsEndpoint || !reflect.DeepEqual(g, r) {
		t.Errorf("record\n got %+v\nwant %+v", g, r)
	}
}
