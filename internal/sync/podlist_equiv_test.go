package sync_test

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/nftpolicy/nftpolicy/internal/sync"
)

// The pod informer lists pods through a decoder of its own (podfields.go), which reads only the
// fields a record uses, while watch events decode whole pods through the generated code. The two paths meet at the record the cache keeps (Watcher.recordPod, through the
// informers' transform for whole pods): the tests below hold the list's record of every pod to
// the one a watch event would make of the same bytes.

// TestPodListDecoderEquivalence: every pod of the corpus (podCorpus), encoded as the API server
// encodes it and again with unknown fields of a later API version, fields out of order and
// single messages split in two, is decoded by the list's own decoder (not its fallback) into
// the record the generated decoder and the transform make of the same bytes: endpoint,
// fingerprint, conversion error, cache key and version. Pod by pod into one reused Pod value,
// and as whole PodList responses through the list's stream decoder, whose records must not
// change as it reuses its buffer for the next pods.
func TestPodListDecoderEquivalence(t *testing.T) {
	pods := podCorpus()
	rng := rand.New(rand.NewPCG(7, 7))
	w := sync.New(sync.Config{})
	d := w.ListPodDecoder()
	errs := errorLimit{t: t}
	var mangled [][]byte
	endpoints, failures := 0, 0
	for i := range pods {
		b, err := pods[i].Marshal()
		if err != nil {
			t.Fatalf("pod %d: %v", i, err)
		}
		mangled = append(mangled, mangle(b, podShape, rng))
		for _, enc := range []struct {
			name string
			b    []byte
		}{{"as the API server writes it", b}, {"mangled", mangled[i]}} {
			want, err := generatedRecord(w, enc.b)
			if err != nil {
				t.Fatalf("pod %d %s: the generated decoder: %v", i, enc.name, err)
			}
			if err := sync.HandDecodes(enc.b); err != nil {
				errs.Errorf("pod %d (%s) %s: the list's decoder rejects it: %v", i, podName(&pods[i]), enc.name, err)
				continue
			}
			got, err := listRecord(d, enc.b)
			if err != nil {
				t.Fatalf("pod %d %s: %v", i, enc.name, err)
			}
			if diff := recordDiff(got, want); diff != "" {
				errs.Errorf("pod %d (%s) %s: %s", i, podName(&pods[i]), enc.name, diff)
			}
			if want.IsEndpoint {
				endpoints++
			}
			if want.Err != nil {
				failures++
			}
		}
	}
	// the corpus reaches both outcomes of a conversion, often
	if endpoints < 2*len(pods)/5 || failures < 2*len(pods)/5 {
		t.Errorf("of %d encodings, %d convert to an endpoint and %d fail to convert", 2*len(pods), endpoints, failures)
	}

	meta := metav1.ListMeta{ResourceVersion: "4711", Continue: "next"}
	var encoded bytes.Buffer
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(&corev1.PodList{ListMeta: meta, Items: pods}, &encoded); err != nil {
		t.Fatal(err)
	}
	for _, l := range []struct {
		name string
		resp []byte
	}{{"encoded by client-go", encoded.Bytes()}, {"mangled", podListResponse(t, meta, mangled)}} {
		name, resp := l.name, l.resp
		var list corev1.PodList
		if _, _, err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Decode(resp, nil, &list); err != nil {
			t.Fatalf("%s list: client-go: %v", name, err)
		}
		gotMeta, got, err := w.DecodePodList(resp)
		if err != nil {
			t.Fatalf("%s list: %v", name, err)
		}
		if !reflect.DeepEqual(gotMeta, list.ListMeta) {
			t.Errorf("%s list: metadata %+v, want %+v", name, gotMeta, list.ListMeta)
		}
		if len(got) != len(list.Items) {
			t.Fatalf("%s list: %d records, want %d", name, len(got), len(list.Items))
		}
		for i := range list.Items {
			obj, _ := w.Transform(&list.Items[i])
			want, _ := sync.CachedPod(obj)
			if diff := recordDiff(got[i], want); diff != "" {
				errs.Errorf("%s list, pod %d (%s): %s", name, i, podName(&pods[i]), diff)
			}
		}
	}
}

// TestPodListDecoderCoversConvertPod: the list's decoder reads exactly the fields that
// ConvertPod and the record read. From each of a few pods (one that converts to an endpoint
// with named ports of a container and of a sidecar; one with status.podIP alone; two whose
// conversion fails on a container's or a sidecar's port, so that the error names them), each
// field of corev1.Pod in turn (every field of every nested struct, the first element of every
// list, a new entry of every map) is set to another value, and the pod's record through the
// list's decoder must equal the generated decoder's. A field that ConvertPod or the record
// reads but the list's decoder skips reads empty in one and set in the other, so the records
// differ. The fields that change a record must be those the decoder reads (decodedFields): one
// the decoder reads and no record depends on is work to drop.
func TestPodListDecoderCoversConvertPod(t *testing.T) {
	endpoint := coveragePod()
	podIPOnly := coveragePod()
	podIPOnly.Status.PodIPs = nil
	badPort := coveragePod()
	badPort.Spec.Containers[0].Ports[0].Protocol = "QUIC"
	badSidecarPort := coveragePod()
	badSidecarPort.Spec.InitContainers[0].Ports[0].ContainerPort = 0
	w := sync.New(sync.Config{})
	d := w.ListPodDecoder()
	errs := errorLimit{t: t}
	f := podFiller{rand.New(rand.NewPCG(3, 3))}
	changed := map[string]bool{}
	for name, base := range map[string]*corev1.Pod{"endpoint": endpoint, "podIP only": podIPOnly, "bad port": badPort, "bad sidecar port": badSidecarPort} {
		baseBytes, err := base.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		baseRec, err := generatedRecord(w, baseBytes)
		if err != nil {
			t.Fatal(err)
		}
		if baseRec.IsEndpoint != (baseRec.Err == nil) {
			t.Fatalf("%s: the base pod converts to endpoint %v, error %v", name, baseRec.IsEndpoint, baseRec.Err)
		}
		fields := 0
		eachLeaf(reflect.TypeFor[corev1.Pod](), "pod", func(r reflect.Value) reflect.Value { return r }, func(path string, find func(reflect.Value) reflect.Value) {
			fields++
			p := base.DeepCopy()
			f.leaf(find(reflect.ValueOf(p).Elem()))
			b, err := p.Marshal()
			if err != nil {
				t.Fatalf("%s, %s: %v", name, path, err)
			}
			if bytes.Equal(b, baseBytes) {
				if !strings.HasPrefix(path, "pod.TypeMeta.") { // not in the protobuf encoding
					errs.Errorf("%s, %s set: the encoding does not change", name, path)
				}
				return
			}
			want, err := generatedRecord(w, b)
			if err != nil {
				t.Fatalf("%s, %s: the generated decoder: %v", name, path, err)
			}
			got, err := listRecord(d, b)
			if err != nil {
				t.Fatalf("%s, %s: %v", name, path, err)
			}
			if diff := recordDiff(got, want); diff != "" {
				errs.Errorf("%s, %s set: %s", name, path, diff)
			}
			if recordDiff(want, baseRec) != "" {
				changed[path] = true
			}
		})
		if fields < 900 { // ≈ 1,000 in k8s.io/api v0.36
			t.Errorf("%s: only %d fields of corev1.Pod walked", name, fields)
		}
	}
	for _, path := range decodedFields {
		if !changed[path] {
			t.Errorf("the list's decoder reads %s, which changes no record", path)
		}
		delete(changed, path)
	}
	for path := range changed {
		t.Errorf("%s changes a record; decodedFields does not list it", path)
	}
}

// decodedFields are the fields of corev1.Pod that decodePodFields reads, as eachLeaf names them.
var decodedFields = []string{
	"pod.ObjectMeta.Name", "pod.ObjectMeta.Namespace", "pod.ObjectMeta.ResourceVersion",
	"pod.ObjectMeta.CreationTimestamp", "pod.ObjectMeta.Labels",
	"pod.Spec.NodeName", "pod.Spec.HostNetwork", "pod.Spec.ServiceAccountName",
	"pod.Spec.Containers[0].Name", "pod.Spec.Containers[0].Ports[0].Name",
	"pod.Spec.Containers[0].Ports[0].ContainerPort", "pod.Spec.Containers[0].Ports[0].Protocol",
	"pod.Spec.InitContainers[0].Name", "pod.Spec.InitContainers[0].RestartPolicy",
	"pod.Spec.InitContainers[0].Ports[0].Name", "pod.Spec.InitContainers[0].Ports[0].ContainerPort",
	"pod.Spec.InitContainers[0].Ports[0].Protocol",
	"pod.Status.Phase", "pod.Status.PodIP", "pod.Status.PodIPs[0].IP",
}

// errorLimit reports a test's errors up to 20, then ends the test: a broken decoder differs on
// most pods.
type errorLimit struct {
	t *testing.T
	n int
}

func (e *errorLimit) Errorf(format string, args ...any) {
	e.t.Helper()
	e.t.Errorf(format, args...)
	if e.n++; e.n == 20 {
		e.t.Fatal("20 errors; the rest is not checked")
	}
}

// listRecord is the record the list makes of the protobuf v1.Pod b, decoded by d from a copy
// that is overwritten once the record is made, as the list reuses its buffer for the next pod.
func listRecord(d *sync.ListPodDecoder, b []byte) (sync.CachedPodRecord, error) {
	buf := bytes.Clone(b)
	rec, err := d.Record(buf)
	for i := range buf {
		buf[i] = 0xff
	}
	return rec, err
}

// generatedRecord decodes the protobuf v1.Pod b as a watch event's pod is decoded (the
// generated decoder, into a new Pod) and returns the record the transform caches of it.
func generatedRecord(w *sync.Watcher, b []byte) (sync.CachedPodRecord, error) {
	p := &corev1.Pod{}
	if err := p.Unmarshal(b); err != nil {
		return sync.CachedPodRecord{}, err
	}
	obj, err := w.Transform(p)
	if err != nil {
		return sync.CachedPodRecord{}, err
	}
	rec, ok := sync.CachedPod(obj)
	if !ok {
		return sync.CachedPodRecord{}, fmt.Errorf("the transform made a %T", obj)
	}
	return rec, nil
}

// recordDiff tells how two records differ, "" when they do not.
func recordDiff(got, want sync.CachedPodRecord) string {
	var diffs []string
	if got.ID != want.ID || got.Key != want.Key {
		diffs = append(diffs, clip(fmt.Sprintf("id %q key %q, want %q %q", got.ID, got.Key, want.ID, want.Key)))
	}
	if got.IsEndpoint != want.IsEndpoint || got.Fingerprint != want.Fingerprint {
		diffs = append(diffs, fmt.Sprintf("endpoint %v fingerprint %x, want %v %x", got.IsEndpoint, got.Fingerprint, want.IsEndpoint, want.Fingerprint))
	}
	if fmt.Sprint(got.Err) != fmt.Sprint(want.Err) {
		diffs = append(diffs, fmt.Sprintf("error %v, want %v", got.Err, want.Err))
	}
	if !reflect.DeepEqual(got.Pending, want.Pending) {
		diffs = append(diffs, fmt.Sprintf("endpoint\n  %s\nwant\n  %s", clip(fmt.Sprintf("%+v", got.Pending)), clip(fmt.Sprintf("%+v", want.Pending))))
	}
	return strings.Join(diffs, "; ")
}

func clip(s string) string {
	if len(s) > 1000 {
		return s[:1000] + "…"
	}
	return s
}

func podName(p *corev1.Pod) string {
	if len(p.Name) > 40 {
		return p.Namespace + "/" + p.Name[:40] + "…"
	}
	return p.Namespace + "/" + p.Name
}

// podListResponse is a protobuf PodList response of the items' bytes, in the envelope the API
// server writes.
func podListResponse(t testing.TB, meta metav1.ListMeta, items [][]byte) []byte {
	t.Helper()
	mb, err := meta.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	list := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), mb)
	for _, b := range items {
		list = protowire.AppendBytes(protowire.AppendTag(list, 2, protowire.BytesType), b)
	}
	u := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: "v1", Kind: "PodList"}, Raw: list}
	ub, err := u.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte("k8s\x00"), ub...)
}

// podCorpus is a deterministic corpus of pods: realistic ones, ones drawn from the usual and
// unusual values of every field ConvertPod and the record read, the unusual shapes by name,
// and pods with every field of corev1.Pod filled with random values (half of them made to
// convert to an endpoint).
func podCorpus() []corev1.Pod {
	rng := rand.New(rand.NewPCG(1, 2))
	var pods []corev1.Pod
	for i := range 200 {
		pods = append(pods, *realisticPod(i))
	}
	for i := range 2000 {
		pods = append(pods, drawnPod(rng, i))
	}
	pods = append(pods, unusualPods()...)
	f := podFiller{rng}
	for i := range 300 {
		var p corev1.Pod
		f.fill(reflect.ValueOf(&p).Elem(), 0)
		if i%2 == 0 {
			convertible(&p, rng)
		}
		pods = append(pods, p)
	}
	return pods
}

var (
	always   = corev1.ContainerRestartPolicyAlways
	never    = corev1.ContainerRestartPolicy("Never")
	onFail   = corev1.ContainerRestartPolicy("OnFailure")
	lowerAlw = corev1.ContainerRestartPolicy("always")
)

// drawnPod draws each field that ConvertPod or the record reads from its usual and unusual
// values, and carries fields the list's decoder skips.
func drawnPod(rng *rand.Rand, i int) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name:            oneOf(rng, fmt.Sprint("pod-", i), "", "p", strings.Repeat("n", 253)),
		Namespace:       oneOf(rng, fmt.Sprint("ns-", i%17), "", "default", strings.Repeat("s", 63)),
		ResourceVersion: oneOf(rng, fmt.Sprint(1000+i), "", "18446744073709551615", "x"),
		CreationTimestamp: oneOf(rng, metav1.Unix(1700000000+int64(i), 0), metav1.Time{}, metav1.Unix(0, 0),
			metav1.Unix(-1, 0), metav1.Unix(1700000000, 999999999), metav1.Unix(253402300799, 0)),
		UID:         "0b7e4c1a-0000-4c6e-9a57-000000000000",
		Annotations: map[string]string{"note": strings.Repeat("a", rng.IntN(100))},
	}}
	if n := oneOf(rng, 3, 0, 1, 64); n > 0 {
		p.Labels = map[string]string{}
		for range n {
			p.Labels[labelKey(rng)] = labelValue(rng)
		}
	}
	p.Spec.NodeName = oneOf(rng, fmt.Sprint("node-", i%100), "", strings.Repeat("n", 253))
	p.Spec.HostNetwork = rng.IntN(10) == 0
	p.Spec.ServiceAccountName = oneOf(rng, "default", "", "sa-web")
	p.Spec.SchedulerName = "default-scheduler"
	for c := range oneOf(rng, 1, 0, 2, 5) {
		p.Spec.Containers = append(p.Spec.Containers, drawnContainer(rng, fmt.Sprint("c", c)))
	}
	for c := range oneOf(rng, 0, 1, 2) {
		ct := drawnContainer(rng, fmt.Sprint("init", c))
		ct.RestartPolicy = oneOf(rng, &always, nil, &never, &onFail, &lowerAlw)
		p.Spec.InitContainers = append(p.Spec.InitContainers, ct)
	}
	p.Status.Phase = oneOf(rng, corev1.PodRunning, corev1.PodPending, "", corev1.PodSucceeded, corev1.PodFailed, corev1.PodUnknown, "running")
	ip := func() string {
		return oneOf(rng, fmt.Sprintf("10.%d.%d.%d", rng.IntN(256), rng.IntN(256), rng.IntN(256)), fmt.Sprintf("fd00::%x:%x", rng.IntN(65536), rng.IntN(65536)),
			"", "10.0.0.1", "::ffff:10.0.0.1", "fe80::1%eth0", "10.0.0.256", "not-an-ip", " 10.0.0.1", "10.0.0.1/32", "::", "0.0.0.0")
	}
	p.Status.PodIP = oneOf(rng, ip(), "")
	for range oneOf(rng, 1, 0, 2, 10) {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip()})
	}
	p.Status.HostIP = "192.168.0.1"
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	return p
}

func drawnContainer(rng *rand.Rand, name string) corev1.Container {
	c := corev1.Container{Name: name, Image: "registry.example.com/app:v1", Env: []corev1.EnvVar{{Name: "A", Value: "b"}}}
	for k := range oneOf(rng, 1, 0, 3) {
		c.Ports = append(c.Ports, corev1.ContainerPort{
			Name:          oneOf(rng, fmt.Sprint("p", k), "", "http", strings.Repeat("x", 15)),
			Protocol:      oneOf(rng, corev1.ProtocolTCP, "", corev1.ProtocolUDP, corev1.ProtocolSCTP, "QUIC", "tcp"),
			ContainerPort: oneOf(rng, int32(1+rng.IntN(65535)), 0, 65535, 65536, -1, math.MaxInt32, math.MinInt32),
		})
	}
	return c
}

// oneOf returns the first of vs (the usual value) half of the time, else one of the others.
func oneOf[T any](rng *rand.Rand, vs ...T) T {
	if rng.IntN(2) == 0 {
		return vs[0]
	}
	return vs[1+rng.IntN(len(vs)-1)]
}

const labelChars = "abcdefghijklmnopqrstuvwxyz0123456789-_."

func labelValue(rng *rand.Rand) string {
	b := make([]byte, oneOf(rng, 5, 0, 1, 63))
	for i := range b {
		b[i] = labelChars[rng.IntN(len(labelChars))]
	}
	return string(b)
}

func labelKey(rng *rand.Rand) string {
	name := "k" + labelValue(rng)
	name = name[:min(len(name), 63)]
	return oneOf(rng, name, "app.kubernetes.io/"+name, strings.Repeat("d", 253)+"/"+name)
}

// unusualPods are the shapes named: no IP, many IPs, many ports, long labels and many of them,
// IPv4-mapped and duplicate addresses, pods whose conversion fails.
func unusualPods() []corev1.Pod {
	base := func(name string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "unusual", Name: name, ResourceVersion: "7",
			CreationTimestamp: metav1.Unix(1700000000, 0), Labels: map[string]string{"app": name}},
			Spec:   corev1.PodSpec{NodeName: "node-1", ServiceAccountName: "default"},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1", PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}, {IP: "fd00::1"}}}}
	}
	var pods []corev1.Pod
	add := func(name string, change func(p *corev1.Pod)) {
		p := base(name)
		change(&p)
		pods = append(pods, p)
	}
	add("no-ip", func(p *corev1.Pod) { p.Status.PodIP, p.Status.PodIPs = "", nil })
	add("pod-ip-only", func(p *corev1.Pod) { p.Status.PodIPs = nil })
	add("pod-ips-only", func(p *corev1.Pod) { p.Status.PodIP = "" })
	add("many-ips", func(p *corev1.Pod) {
		p.Status.PodIPs = nil
		for i := range 64 {
			p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: fmt.Sprintf("10.0.%d.%d", i/4, i%4)}, corev1.PodIP{IP: fmt.Sprintf("fd00::%x", i)})
		}
	})
	add("mapped-and-duplicate", func(p *corev1.Pod) {
		p.Status.PodIPs = []corev1.PodIP{{IP: "::ffff:10.0.0.1"}, {IP: "10.0.0.1"}, {IP: "fd00::1"}, {IP: "FD00::1"}}
	})
	add("empty-ip-in-list", func(p *corev1.Pod) { p.Status.PodIPs = []corev1.PodIP{{IP: ""}} })
	add("300-ports", func(p *corev1.Pod) {
		c := corev1.Container{Name: "big"}
		for i := range 300 {
			c.Ports = append(c.Ports, corev1.ContainerPort{Name: fmt.Sprint("p", i), ContainerPort: int32(1000 + i), Protocol: []corev1.Protocol{"TCP", "UDP", "SCTP"}[i%3]})
		}
		p.Spec.Containers = []corev1.Container{c}
	})
	add("300-ports-across-sidecars", func(p *corev1.Pod) {
		for c := range 30 {
			ct := corev1.Container{Name: fmt.Sprint("c", c)}
			for i := range 10 {
				ct.Ports = append(ct.Ports, corev1.ContainerPort{Name: fmt.Sprintf("p%d-%d", c, i), ContainerPort: int32(2000 + c*10 + i)})
			}
			if c%2 == 0 {
				p.Spec.Containers = append(p.Spec.Containers, ct)
			} else {
				ct.RestartPolicy = &always
				p.Spec.InitContainers = append(p.Spec.InitContainers, ct)
			}
		}
	})
	add("long-labels", func(p *corev1.Pod) {
		for i := range 70 {
			p.Labels[fmt.Sprintf("%s/%s%02d", strings.Repeat("d", 250), strings.Repeat("k", 61), i)] = strings.Repeat(string(rune('a'+i%26)), 63)
		}
	})
	add("empty-label", func(p *corev1.Pod) { p.Labels = map[string]string{"": "", "a": ""} })
	add("bad-ip", func(p *corev1.Pod) { p.Status.PodIPs = []corev1.PodIP{{IP: "10.0.0.1"}, {IP: "fd00::1::1"}} })
	add("zoned-ip", func(p *corev1.Pod) { p.Status.PodIPs = []corev1.PodIP{{IP: "fe80::1%eth0"}} })
	add("bad-protocol", func(p *corev1.Pod) {
		p.Spec.Containers = []corev1.Container{{Name: "c", Ports: []corev1.ContainerPort{{Name: "q", ContainerPort: 443, Protocol: "QUIC"}}}}
	})
	add("port-out-of-range", func(p *corev1.Pod) {
		p.Spec.Containers = []corev1.Container{{Name: "c", Ports: []corev1.ContainerPort{{Name: "big", ContainerPort: 65536}}}}
	})
	add("unnamed-bad-port", func(p *corev1.Pod) {
		p.Spec.Containers = []corev1.Container{{Name: "c", Ports: []corev1.ContainerPort{{ContainerPort: -5, Protocol: "QUIC"}}}}
	})
	add("sidecar-bad-port", func(p *corev1.Pod) {
		p.Spec.InitContainers = []corev1.Container{{Name: "s", RestartPolicy: &always, Ports: []corev1.ContainerPort{{Name: "m", ContainerPort: 0}}}}
	})
	add("init-bad-port", func(p *corev1.Pod) {
		p.Spec.InitContainers = []corev1.Container{{Name: "i", RestartPolicy: &never, Ports: []corev1.ContainerPort{{Name: "m", ContainerPort: 0}}}}
	})
	add("host-network", func(p *corev1.Pod) { p.Spec.HostNetwork = true })
	add("unbound", func(p *corev1.Pod) { p.Spec.NodeName = "" })
	add("succeeded", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded })
	add("", func(p *corev1.Pod) {})
	add("no-namespace", func(p *corev1.Pod) { p.Namespace = "" })
	add("no-namespace-no-version", func(p *corev1.Pod) { p.Namespace, p.ResourceVersion = "", "" })
	add("nothing", func(p *corev1.Pod) { *p = corev1.Pod{} })
	return pods
}

// convertible makes a pod with random fields convert to an endpoint: bound, not hostNetwork,
// running or pending, with valid addresses and valid named ports.
func convertible(p *corev1.Pod, rng *rand.Rand) {
	p.Spec.NodeName = "node-" + p.Spec.NodeName
	p.Spec.HostNetwork = false
	p.Status.Phase = []corev1.PodPhase{corev1.PodRunning, corev1.PodPending}[rng.IntN(2)]
	for i := range p.Status.PodIPs {
		p.Status.PodIPs[i].IP = fmt.Sprintf("10.1.%d.%d", i, rng.IntN(256))
	}
	p.Status.PodIP = "fd00::9"
	for _, cs := range [][]corev1.Container{p.Spec.Containers, p.Spec.InitContainers} {
		for i := range cs {
			for j := range cs[i].Ports {
				cs[i].Ports[j].ContainerPort = int32(1 + rng.IntN(65535))
				cs[i].Ports[j].Protocol = []corev1.Protocol{"", "TCP", "UDP", "SCTP"}[rng.IntN(4)]
			}
		}
	}
}

// coveragePod converts to an endpoint with named ports of a container and of a sidecar, an
// init container that serves none, both addresses and labels; it carries the fields the list
// skips (realisticPod).
func coveragePod() *corev1.Pod {
	p := realisticPod(3)
	p.Spec.InitContainers = []corev1.Container{
		{Name: "proxy", RestartPolicy: &always, Ports: []corev1.ContainerPort{{Name: "proxy", ContainerPort: 15001, Protocol: corev1.ProtocolTCP}}},
		{Name: "setup", Ports: []corev1.ContainerPort{{Name: "setup", ContainerPort: 9, Protocol: corev1.ProtocolUDP}}},
	}
	return p
}

// The messages the list's decoder reads into, as shapes for mangle: which of their fields hold
// messages it reads, and the first field number their type does not use (fields of a later API
// version start there).
type pbShape struct {
	fields map[protowire.Number]shapeField
	next   protowire.Number
}

// shapeField is a field holding a message: its shape, and whether it holds one message (a repeated
// occurrence merges into it) rather than one element of a list.
type shapeField struct {
	shape  *pbShape
	single bool
}

var (
	timeShape      = &pbShape{next: 3} // seconds, nanos
	entryShape     = &pbShape{next: 3} // a map entry: key, value
	portShape      = &pbShape{next: nextField[corev1.ContainerPort]()}
	containerShape = &pbShape{next: nextField[corev1.Container](), fields: map[protowire.Number]shapeField{6: {shape: portShape}}}
	podShape       = &pbShape{next: nextField[corev1.Pod](), fields: map[protowire.Number]shapeField{
		1: {single: true, shape: &pbShape{next: nextField[metav1.ObjectMeta](), fields: map[protowire.Number]shapeField{
			8: {single: true, shape: timeShape}, 11: {shape: entryShape}}}},
		2: {single: true, shape: &pbShape{next: nextField[corev1.PodSpec](), fields: map[protowire.Number]shapeField{
			2: {shape: containerShape}, 20: {shape: containerShape}}}},
		3: {single: true, shape: &pbShape{next: nextField[corev1.PodStatus](), fields: map[protowire.Number]shapeField{
			12: {shape: &pbShape{next: nextField[corev1.PodIP]()}}}}},
	}}
)

// nextField is the first protobuf field number that T's fields do not use.
func nextField[T any]() protowire.Number {
	var max protowire.Number
	t := reflect.TypeFor[T]()
	for i := range t.NumField() {
		tag := strings.Split(t.Field(i).Tag.Get("protobuf"), ",")
		var n protowire.Number
		if len(tag) > 1 {
			_, _ = fmt.Sscan(tag[1], &n)
		}
		max = maxNum(max, n)
	}
	return max + 1
}

func maxNum(a, b protowire.Number) protowire.Number {
	if a > b {
		return a
	}
	return b
}

// mangle re-encodes the message b of shape sh, and the messages of its fields the shape names,
// with what a valid encoding may hold that the API server's does not: unknown fields of every
// wire type (the next field numbers of the type, as a later API version adds them, and large
// ones), fields in another order, and single messages split in two occurrences.
func mangle(b []byte, sh *pbShape, rng *rand.Rand) []byte {
	var fields [][]byte
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if n < 0 || m < 0 {
			panic("mangle: not a valid message")
		}
		field := b[:n+m]
		if fs, ok := sh.fields[num]; ok && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(b[n:])
			v = mangle(v, fs.shape, rng)
			if fs.single && rng.IntN(3) == 0 {
				first, second := splitMessage(v, rng)
				fields = append(fields, appendMessage(nil, num, first))
				field = appendMessage(nil, num, second)
			} else {
				field = appendMessage(nil, num, v)
			}
		}
		fields = append(fields, field)
		b = b[n+m:]
	}
	for range rng.IntN(4) {
		at := rng.IntN(len(fields) + 1)
		fields = append(fields[:at], append([][]byte{unknownField(sh, rng)}, fields[at:]...)...)
	}
	if rng.IntN(4) == 0 {
		rng.Shuffle(len(fields), func(i, j int) { fields[i], fields[j] = fields[j], fields[i] })
	}
	return bytes.Join(fields, nil)
}

func appendMessage(b []byte, num protowire.Number, v []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), v)
}

// splitMessage cuts the message b between two of its fields.
func splitMessage(b []byte, rng *rand.Rand) (first, second []byte) {
	var cuts []int
	for off := 0; off < len(b); {
		_, _, n := protowire.ConsumeField(b[off:])
		off += n
		cuts = append(cuts, off)
	}
	if len(cuts) == 0 {
		return b, nil
	}
	at := cuts[rng.IntN(len(cuts))]
	return b[:at], b[at:]
}

// unknownField is a field that a message of shape sh does not know, of a random wire type.
func unknownField(sh *pbShape, rng *rand.Rand) []byte {
	num := sh.next + protowire.Number(rng.IntN(3))
	if rng.IntN(4) == 0 {
		num = protowire.Number(1000 + rng.IntN(int(protowire.MaxValidNumber)-1000))
	}
	switch rng.IntN(6) {
	case 0:
		return protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.VarintType), rng.Uint64()>>rng.IntN(64))
	case 1:
		return protowire.AppendFixed32(protowire.AppendTag(nil, num, protowire.Fixed32Type), rng.Uint32())
	case 2:
		return protowire.AppendFixed64(protowire.AppendTag(nil, num, protowire.Fixed64Type), rng.Uint64())
	case 3: // a message that looks like the ones the decoder reads: a name, a number
		inner := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "name")
		inner = protowire.AppendVarint(protowire.AppendTag(inner, 3, protowire.VarintType), 8080)
		return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), inner)
	case 4:
		junk := make([]byte, rng.IntN(40))
		for i := range junk {
			junk[i] = byte(rng.IntN(256))
		}
		return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), junk)
	}
	g := protowire.AppendTag(nil, num, protowire.StartGroupType)
	g = protowire.AppendVarint(protowire.AppendTag(g, 1, protowire.VarintType), 1)
	return protowire.AppendTag(g, num, protowire.EndGroupType)
}

// podFiller sets the fields of Kubernetes objects to random values.
type podFiller struct{ rng *rand.Rand }

var (
	timeType     = reflect.TypeFor[metav1.Time]()
	quantityType = reflect.TypeFor[resource.Quantity]()
	intStrType   = reflect.TypeFor[intstr.IntOrString]()
)

// isLeaf reports whether t holds no fields that fill and eachLeaf go into: scalars, strings,
// bytes, maps, and the types that encode themselves (times, quantities, int-or-strings).
func isLeaf(t reflect.Type) bool {
	switch t {
	case timeType, quantityType, intStrType:
		return true
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Pointer:
		return false
	case reflect.Slice:
		return t.Elem().Kind() == reflect.Uint8
	}
	return true
}

// fill gives every field of v a random value: each pointer set (mostly), each list and map one
// to three elements.
func (f podFiller) fill(v reflect.Value, depth int) {
	t := v.Type()
	if isLeaf(t) && t.Kind() != reflect.Map {
		f.leaf(v)
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		for i := range t.NumField() {
			if t.Field(i).IsExported() {
				f.fill(v.Field(i), depth+1)
			}
		}
	case reflect.Pointer:
		if depth > 30 || f.rng.IntN(5) == 0 {
			return
		}
		v.Set(reflect.New(t.Elem()))
		f.fill(v.Elem(), depth+1)
	case reflect.Slice:
		n := 1 + f.rng.IntN(3)
		v.Set(reflect.MakeSlice(t, n, n))
		for i := range n {
			f.fill(v.Index(i), depth+1)
		}
	case reflect.Map:
		for range 1 + f.rng.IntN(3) {
			f.leaf(v)
		}
	}
}

// leaf sets v, of a type isLeaf accepts, to a random value other than the one it holds (a map
// gains an entry).
func (f podFiller) leaf(v reflect.Value) {
	switch v.Type() {
	case timeType:
		old := v.Interface().(metav1.Time)
		v.Set(reflect.ValueOf(metav1.Unix(old.Unix()+1+f.rng.Int64N(1e9), 0)))
		return
	case quantityType:
		q := v.Interface().(resource.Quantity)
		q.Add(*resource.NewQuantity(1+f.rng.Int64N(1<<20), resource.BinarySI))
		v.Set(reflect.ValueOf(q))
		return
	case intStrType:
		old := v.Interface().(intstr.IntOrString)
		if old.Type == intstr.Int {
			v.Set(reflect.ValueOf(intstr.FromString("p" + f.word())))
		} else {
			v.Set(reflect.ValueOf(intstr.FromInt32(1 + f.rng.Int32N(65535))))
		}
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(v.String() + f.word())
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(v.Int() + 1 + f.rng.Int64N(1000))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(v.Uint() + 1 + f.rng.Uint64N(1000))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(v.Float() + 1.5)
	case reflect.Slice: // bytes
		v.SetBytes(append(bytes.Clone(v.Bytes()), f.word()...))
	case reflect.Map:
		if v.IsNil() {
			v.Set(reflect.MakeMap(v.Type()))
		}
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		f.fill(k, 0)
		f.fill(e, 0)
		v.SetMapIndex(k, e)
	default:
		panic("podFiller: no value for a " + v.Type().String())
	}
}

// word is a short random string of label characters.
func (f podFiller) word() string {
	b := make([]byte, 1+f.rng.IntN(12))
	for i := range b {
		b[i] = labelChars[f.rng.IntN(len(labelChars))]
	}
	return string(b)
}

// eachLeaf calls visit with the path of each field under t that isLeaf accepts (through the
// structs, pointers and list elements above it) and a function that finds that field in a
// value of t, making the pointers and first list elements on the way. A type that contains
// itself is walked once per path.
func eachLeaf(t reflect.Type, path string, find func(reflect.Value) reflect.Value, visit func(path string, find func(reflect.Value) reflect.Value)) {
	eachLeafOnce(t, path, find, visit, map[reflect.Type]bool{})
}

func eachLeafOnce(t reflect.Type, path string, find func(reflect.Value) reflect.Value, visit func(string, func(reflect.Value) reflect.Value), onPath map[reflect.Type]bool) {
	if isLeaf(t) {
		visit(path, find)
		return
	}
	if onPath[t] {
		return
	}
	onPath[t] = true
	defer delete(onPath, t)
	switch t.Kind() {
	case reflect.Struct:
		for i := range t.NumField() {
			if sf := t.Field(i); sf.IsExported() {
				eachLeafOnce(sf.Type, path+"."+sf.Name, func(r reflect.Value) reflect.Value { return find(r).Field(i) }, visit, onPath)
			}
		}
	case reflect.Pointer:
		eachLeafOnce(t.Elem(), path, func(r reflect.Value) reflect.Value {
			p := find(r)
			if p.IsNil() {
				p.Set(reflect.New(t.Elem()))
			}
			return p.Elem()
		}, visit, onPath)
	case reflect.Slice:
		eachLeafOnce(t.Elem(), path+"[0]", func(r reflect.Value) reflect.Value {
			s := find(r)
			if s.Len() == 0 {
				s.Set(reflect.Append(s, reflect.New(t.Elem()).Elem()))
			}
			return s.Index(0)
		}, visit, onPath)
	}
}
