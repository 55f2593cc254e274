package sync_test

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nftpolicy/nftpolicy/internal/sync"
)

// FuzzPodDecoders: random bytes as one pod of the list. Neither decoder may panic. When the
// generated decoder (a watch event's) accepts the bytes, the list must accept them too and make
// the same record — decodePodFields, or the generated decoder for bytes decodePodFields rejects;
// bytes the generated decoder rejects the list may read or reject (client-go's own list would
// fail on them). As in a list, the bytes are decoded into the Pod value a crowded pod was
// decoded into before, from a buffer that is overwritten once the record is made: a record
// keeps no view of it. Seeds: small pods of the corpus as the API server encodes them and
// mangled, and the encodings on which the decoders once differed (decoderRegressions).
func FuzzPodDecoders(f *testing.F) {
	// small pods of the corpus only: the fuzzer mutates and minimizes its inputs byte by byte
	pods := podCorpus()
	rng := rand.New(rand.NewPCG(11, 11))
	for i, seeds := 0, 0; i < len(pods) && seeds < 40; i += 7 {
		b, err := pods[i].Marshal()
		if err != nil {
			f.Fatal(err)
		}
		if len(b) <= 600 {
			f.Add(b)
			f.Add(mangle(b, podShape, rng))
			seeds++
		}
	}
	for _, r := range decoderRegressions {
		f.Add(r.pod)
	}
	// more labels, containers, ports and addresses than most inputs, and small: it is decoded
	// at every run
	ports := []corev1.ContainerPort{{Name: "a", ContainerPort: 1}, {Name: "b", ContainerPort: 2, Protocol: corev1.ProtocolUDP}}
	crowded := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "crowded", ResourceVersion: "1",
		Labels: map[string]string{"a": "1", "b": "2", "c": "3", "d": "4"}},
		Spec: corev1.PodSpec{NodeName: "node", Containers: []corev1.Container{{Name: "c1", Ports: ports}, {Name: "c2", Ports: ports}},
			InitContainers: []corev1.Container{{Name: "i1", RestartPolicy: &always, Ports: ports}, {Name: "i2", Ports: ports}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.9",
			PodIPs: []corev1.PodIP{{IP: "10.0.0.9"}, {IP: "fd00::9"}, {IP: "10.0.0.10"}, {IP: "fd00::10"}}}}
	before, err := crowded.Marshal()
	if err != nil {
		f.Fatal(err)
	}
	w := sync.New(sync.Config{})
	f.Fuzz(func(t *testing.T, b []byte) {
		want, genErr := generatedRecord(w, b)
		d := w.ListPodDecoder()
		if _, err := d.Record(before); err != nil {
			t.Fatal(err)
		}
		got, err := listRecord(d, b)
		switch {
		case genErr != nil:
		case err != nil:
			t.Fatalf("the list rejects a pod the generated decoder reads: %v", err)
		default:
			if diff := recordDiff(got, want); diff != "" {
				t.Fatalf("the list's record differs: %s", diff)
			}
		}
	})
}

// decoderRegressions are encodings of pods on which the list and a watch event once made
// different records.
var decoderRegressions = []struct {
	name string
	pod  []byte
}{
	{"creationTimestamp twice: seconds, then nanos alone (the epoch)", seedPod(
		cat(pbField(1, "a"), pbField(3, "ns"), pbField(8, pbVarint(1, 1700000000)), pbField(8, pbVarint(2, 5))),
		pbField(10, "node"))},
	{"no namespace, no resourceVersion: the record's id is the name alone", seedPod(
		pbField(1, "a"), pbField(10, "node"))},
	{"hostNetwork as a varint of more than 64 bits", seedPod(
		cat(pbField(1, "a"), pbField(3, "ns")),
		cat(pbField(10, "node"), protowire.AppendTag(nil, 11, protowire.VarintType), []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02}))},
	{"a label's key tagged fixed32, which the generated decoder reads as a string of 3 bytes", seedPod(
		cat(pbField(1, "a"), pbField(3, "ns"), pbField(11, []byte{0x0d, 0x03, 0x12, 0x01, 0x76})),
		pbField(10, "node"))},
}

// seedPod is a pod of the metadata and spec given, with a status holding one address.
func seedPod(meta, spec []byte) []byte {
	return cat(pbField(1, meta), pbField(2, spec), pbField(3, pbField(6, "10.0.0.1")))
}

// pbField is a length-delimited field.
func pbField[T []byte | string](num protowire.Number, v T) []byte {
	return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), []byte(v))
}

// pbVarint is a varint field.
func pbVarint(num protowire.Number, v uint64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.VarintType), v)
}

func cat(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
